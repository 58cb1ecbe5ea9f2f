package stack_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gocql/gocql"
	"github.com/google/uuid"

	"github.com/autopush-go/autopush/apitier/apitiertest"
	et "github.com/autopush-go/autopush/engine/enginetest"
	"github.com/autopush-go/autopush/stack"
	"github.com/autopush-go/autopush/stack/stacktest"
	"github.com/autopush-go/autopush/storage/scylla"
	"github.com/autopush-go/autopush/storage/scylla/cqltest"
)

// userStatements records the CQL statements made on the user agents'
// tables (router, message), not the sender's or the broadcasts' polls.
type userStatements struct {
	mu   sync.Mutex
	list []string
}

func (u *userStatements) ObserveQuery(_ context.Context, q gocql.ObservedQuery) {
	if q.Attempt != 0 {
		return // a driver retry, not a statement the caller made
	}
	s := strings.Join(strings.Fields(q.Statement), " ")
	if !strings.Contains(s, " router ") && !strings.Contains(s, " message ") {
		return
	}
	u.mu.Lock()
	u.list = append(u.list, strings.SplitN(s, " WHERE ", 2)[0])
	u.mu.Unlock()
}

// ObserveBatch records a batch as one statement (one round trip),
// "BATCH" and its statements.
func (u *userStatements) ObserveBatch(_ context.Context, b gocql.ObservedBatch) {
	if b.Attempt != 0 {
		return
	}
	parts := make([]string, len(b.Statements))
	for i, st := range b.Statements {
		parts[i] = strings.SplitN(strings.Join(strings.Fields(st), " "), " WHERE ", 2)[0]
	}
	u.mu.Lock()
	u.list = append(u.list, "BATCH: "+strings.Join(parts, "; "))
	u.mu.Unlock()
}

// has reports whether a statement beginning with prefix was observed
// since the last take.
func (u *userStatements) has(prefix string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, s := range u.list {
		if strings.HasPrefix(s, prefix) {
			return true
		}
	}
	return false
}

func (u *userStatements) take() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	l := u.list
	u.list = nil
	return l
}

// TestStatementsPerHelloAndPush counts, on Cassandra, the statements the
// two hot paths make (docs/benchmarks.md): a new user agent's hello makes
// none, and its first register writes its record and its channel in one
// batch and reads nothing; a push to a
// connected user agent reads its record and channel once and writes
// nothing. A returning user agent and a stored push are counted too.
func TestStatementsPerHelloAndPush(t *testing.T) {
	ccfg := cqltest.Keyspace(t, "hotpath")
	count := &userStatements{}
	ccfg.QueryObserver, ccfg.BatchObserver = count, count
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	store, err := scylla.New(ctx, ccfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	cfg := stacktest.Config(t)
	st, err := stack.New(cfg, store, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		st.Shutdown(ctx)
	})
	want := func(what string, n int) {
		t.Helper()
		got := count.take()
		t.Logf("%s: %d statements:\n%s", what, len(got), strings.Join(got, "\n"))
		if len(got) != n {
			t.Errorf("%s: %d statements, want %d:\n%s", what, len(got), n, strings.Join(got, "\n"))
		}
	}
	want("start", len(count.take())) // whatever starting reads

	c := et.Dial(t, st.WSAddr())
	uaid := c.Hello("")
	// Its record waits for its first register (the reference's deferred
	// user): the hello alone makes no statement.
	want("a new user agent's hello", 0)
	chid := uuid.NewString()
	reg := c.Register(chid, "")
	endpoint, _ := reg["pushEndpoint"].(string)
	if reg["status"] != 200.0 || endpoint == "" {
		t.Fatalf("register %v", reg)
	}
	want("its first register", 1)

	push := func() string {
		t.Helper()
		a := apitiertest.Send(t, "POST", endpoint, []byte("x"), "TTL", "60", "Content-Encoding", "aes128gcm")
		return apitiertest.WantCreated(t, a, st.EndpointURL(), "60")
	}
	id := push()
	m := c.Read()
	if m["version"] != id {
		t.Fatalf("notification %v, want version %s", m, id)
	}
	c.Ack(chid, id)
	c.Barrier()
	// The read of the record and channel; the barrier's register adds
	// its channel (the direct message was never stored: no delete).
	want("a push to a connected user agent, delivered and acked (and the barrier's register)", 2)
	// The next push to that subscription goes on the cached route (the
	// connection the last one reached): no statement.
	id = push()
	if m := c.Read(); m["version"] != id {
		t.Fatalf("notification %v, want version %s", m, id)
	}
	c.Ack(chid, id)
	c.Barrier()
	want("a second push to the subscription, on the cached route (and the barrier's register)", 1)

	c.Close()
	// The driver tells the observer after the statement returns, so the
	// record read back cleared is not enough: wait for the clear's own
	// statement to be counted too, or it lands in the push's count.
	et.Eventually(t, 10*time.Second, "the node's record cleared", func() bool {
		u, err := store.GetUser(context.Background(), uuid.MustParse(uaid))
		return err == nil && u.NodeID == "" && count.has("DELETE node_id FROM router")
	})
	count.take()
	push()
	want("a push to a disconnected user agent (stored)", 3) // the read, the message, the record again

	c = et.Dial(t, st.WSAddr())
	c.Hello(uaid)
	if m := c.Read(); m["version"] == nil {
		t.Fatalf("stored notification %v", m)
	}
	// The record read and rewritten (storage.Reconnect), the check's two
	// reads (topic messages, then the others).
	want("a returning user agent's hello, and the check that finds its message", 4)
}
