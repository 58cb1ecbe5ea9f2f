package scylla

import (
	"errors"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gocql/gocql"
	"github.com/google/uuid"

	"github.com/autopush-go/autopush/storage"
)

// shape is a statement's verb and table ("UPDATE router"), with " cursor"
// for a write of the read cursor and " IF" for a conditional write: what
// decides its class, read from the CQL alone.
func shape(cql string) string {
	f := strings.Fields(cql)
	table := ""
	for i, w := range f[:len(f)-1] {
		if w == "FROM" || w == "INTO" || (i == 0 && w == "UPDATE") {
			table = f[i+1]
			break
		}
	}
	s := f[0] + " " + table
	if f[0] != "SELECT" && table == "router" && regexp.MustCompile(`\bSET cursor =`).MatchString(cql) {
		s += " cursor"
	}
	if regexp.MustCompile(`\bIF\b`).MatchString(cql) {
		s += " IF"
	}
	return s
}

// classOf is the class docs/storage.md gives a statement of that shape:
// every SELECT reads; writes of the router table but the cursor are router
// writes; the rest (messages, acks, the cursor, broadcasts, the sender's
// tables) message writes.
func classOf(shape string) opClass {
	switch {
	case strings.HasPrefix(shape, "SELECT "):
		return classRead
	case strings.Contains(shape, " router") && !strings.Contains(shape, " cursor"):
		return classRouterWrite
	}
	return classMessageWrite
}

// TestStatementClasses checks the class and LWT mark of every statement of
// the package against its CQL.
func TestStatementClasses(t *testing.T) {
	if len(statements) < 40 {
		t.Fatalf("%d statements registered; the package has more than 40", len(statements))
	}
	seen := map[string]bool{}
	count := map[opClass]int{}
	for _, st := range statements {
		sh := shape(st.cql)
		if seen[st.cql] {
			t.Errorf("statement declared twice: %s", sh)
		}
		seen[st.cql] = true
		count[st.class]++
		if want := classOf(sh); st.class != want {
			t.Errorf("%s is a %s, want %s:\n%s", sh, st.class, want, st.cql)
		}
		if lwt := strings.HasSuffix(sh, " IF"); st.lwt != lwt {
			t.Errorf("%s: lwt %v, want %v", sh, st.lwt, lwt)
		}
		// A counter increment (n = n + ...) must not be repeated.
		if once := st.lwt || regexp.MustCompile(`\bSET (\w+) = (\w+) \+`).MatchString(st.cql); st.once != once {
			t.Errorf("%s: once %v, want %v", sh, st.once, once)
		}
	}
	t.Logf("%d statements: %d reads, %d router writes, %d message writes",
		len(statements), count[classRead], count[classRouterWrite], count[classMessageWrite])
}

// TestSpeculationAttempts: the extra executions are Config's, but never
// more than the nodes up besides one; the count of nodes is taken at most
// once per upRefresh.
func TestSpeculationAttempts(t *testing.T) {
	up, calls := 0, 0
	sp := newSpeculation(2, time.Millisecond, func() int { calls++; return up })
	for _, tc := range []struct{ up, want int }{{0, 0}, {1, 0}, {2, 1}, {3, 2}, {5, 2}} {
		up = tc.up
		sp.counted.Store(0) // the count is stale
		if got := sp.Attempts(); got != tc.want {
			t.Errorf("%d nodes up: %d attempts, want %d", tc.up, got, tc.want)
		}
	}
	calls = 0
	up = 1
	sp.counted.Store(time.Now().UnixNano())
	if got := sp.Attempts(); got != 2 || calls != 0 {
		t.Fatalf("within upRefresh of the last count (5 up): %d attempts, %d counts; want the last count's 2, no count", got, calls)
	}
	sp.counted.Store(time.Now().Add(-upRefresh).UnixNano())
	if got := sp.Attempts(); got != 0 || calls != 1 {
		t.Fatalf("upRefresh after the last count (1 up): %d attempts, %d counts; want 0, 1", got, calls)
	}
	if newSpeculation(0, time.Millisecond, func() int { return 3 }).Attempts() != 0 {
		t.Fatal("speculation with 0 attempts configured speculates")
	}
}

// traceIDs collects the trace ids of the statements of a session.
type traceIDs struct {
	mu  sync.Mutex
	ids [][]byte
}

func (t *traceIDs) Trace(id []byte) {
	t.mu.Lock()
	t.ids = append(t.ids, slices.Clone(id))
	t.mu.Unlock()
}

func (t *traceIDs) take() [][]byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	ids := t.ids
	t.ids = nil
	return ids
}

// traced is a statement as Cassandra's trace recorded it: its shape and
// the levels it ran at ("QUORUM", "QUORUM/LOCAL_SERIAL" for an LWT). A
// batch's trace records no level: "BATCH @?".
func traced(tb testing.TB, ids [][]byte) []string {
	tb.Helper()
	var out []string
	for _, id := range ids {
		var params map[string]string
		var request string
		// The trace is written asynchronously after the answer.
		deadline := time.Now().Add(30 * time.Second)
		for {
			err := admin(tb).Query(`SELECT request, parameters FROM system_traces.sessions WHERE session_id = ?`, id).Scan(&request, &params)
			if err == nil && request != "" {
				break
			}
			if err != nil && !errors.Is(err, gocql.ErrNotFound) || time.Now().After(deadline) {
				tb.Fatalf("trace %x: %v, parameters %v", id, err, params)
			}
			time.Sleep(20 * time.Millisecond)
		}
		if strings.HasPrefix(request, "Preparing") {
			continue // a batch's statements are prepared traced
		}
		if strings.Contains(request, "batch") {
			out = append(out, "BATCH @?")
			continue
		}
		sh, level := shape(params["query"]), params["consistency_level"]
		if level == "" {
			tb.Fatalf("trace %x: %q without a level: %v", id, request, params)
		}
		if strings.HasSuffix(sh, " IF") {
			level += "/" + params["serial_consistency_level"]
		}
		out = append(out, sh+" @"+level)
	}
	return out
}

// TestConsistencyPerClass runs the store's operations with every statement
// traced and reads back from Cassandra the level each statement ran at: a
// hello, a register, a push stored and read, an ack, a disconnect, the
// channel refresh, and the sender's calls. With a level per class, each
// statement runs at its class's; with none, every one at Consistency.
func TestConsistencyPerClass(t *testing.T) {
	perClass := testConfig(t)
	perClass.Consistency = "ONE" // used by nothing: every class has its own
	perClass.ReadConsistency = "LOCAL_ONE"
	perClass.RouterWriteConsistency = "QUORUM"
	perClass.MessageWriteConsistency = "ALL"
	fallback := testConfig(t)
	fallback.Consistency = "LOCAL_QUORUM" // the default; the classes empty
	for _, tc := range []struct {
		name                  string
		cfg                   Config
		read, router, message string
	}{
		{"a level per class", perClass, "LOCAL_ONE", "QUORUM", "ALL"},
		{"classes empty", fallback, "LOCAL_QUORUM", "LOCAL_QUORUM", "LOCAL_QUORUM"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			level := map[opClass]string{classRead: tc.read, classRouterWrite: tc.router, classMessageWrite: tc.message}
			s := newTestStoreWith(t, tc.cfg)
			ids := &traceIDs{}
			s.session.SetTrace(ids)
			var all []string
			check := func(what string, want ...string) {
				t.Helper()
				got := traced(t, ids.take())
				all = append(all, got...)
				slices.Sort(got)
				for i, w := range want {
					sh, class, _ := strings.Cut(w, "@")
					want[i] = sh + " @" + level[map[string]opClass{"read": classRead, "router": classRouterWrite, "message": classMessageWrite}[class]]
					if strings.HasSuffix(sh, " IF") {
						want[i] += "/LOCAL_SERIAL"
					}
					if sh == "BATCH" {
						want[i] = "BATCH @?"
					}
				}
				slices.Sort(want)
				t.Logf("%s: %v", what, got)
				if !slices.Equal(got, want) {
					t.Errorf("%s ran\n\t%v\nwant\n\t%v", what, got, want)
				}
			}
			ctx := tctx(t)
			uaid, chid := uuid.New(), uuid.New()
			user := storage.User{UAID: uaid, RouterType: "webpush", NodeID: "http://n1", ConnectedAt: time.Now().UnixMilli()}

			ok(t, s.ConnectNew(ctx, user, chid), "first register, new")
			check("a new user agent's first register", "BATCH")
			ok(t, s.AddChannel(ctx, uaid, uuid.New()), "register")
			check("register", "INSERT router@router")
			user.ConnectedAt++
			_, err := s.Reconnect(ctx, user)
			ok(t, err, "hello, returning")
			check("a returning user agent's hello", "SELECT router@read", "UPDATE router@router")

			_, has, err := s.Subscription(ctx, uaid, chid)
			ok(t, err, "subscription")
			key := storage.NewSortKey()
			ok(t, s.SaveMessage(ctx, uaid, storage.Message{CHID: chid, SortKey: key, TTL: 60, Version: "v1"}), "save")
			if !has {
				t.Fatal("the channel is not subscribed")
			}
			check("a push stored", "SELECT router@read", "INSERT message@message")
			msgs, err := s.TimestampMessages(ctx, uaid, 0, 10)
			ok(t, err, "read messages")
			if len(msgs) != 1 {
				t.Fatalf("%d messages stored, want 1", len(msgs))
			}
			check("the stored messages read", "SELECT message@read")
			ok(t, s.DeleteMessage(ctx, uaid, msgs[0].Key()), "ack")
			ok(t, s.AdvanceCursor(ctx, uaid, key), "advance")
			check("an ack and the cursor", "DELETE message@message", "UPDATE router cursor@message")
			ok(t, s.ClearNode(ctx, uaid, user.ConnectedAt), "clear node")
			check("a disconnect", "DELETE router@router")

			// A partition with a channel but no refresh mark: Connect
			// refreshes the channels, in one batch.
			other := uuid.New()
			ok(t, s.AddChannel(ctx, other, chid), "register without a record")
			ids.take()
			ok(t, s.Connect(ctx, storage.User{UAID: other, RouterType: "webpush", NodeID: "http://n1", ConnectedAt: time.Now().UnixMilli()}), "connect")
			check("a hello that refreshes the channels", "SELECT router@read", "UPDATE router@router", "SELECT router@read", "BATCH")
			// The trace of a batch has no level; the refresh's batch is
			// built by s.batch for router writes.
			if got := s.batch(ctx, classRouterWrite).GetConsistency().String(); got != tc.router {
				t.Errorf("a router write batch is at %s, want %s", got, tc.router)
			}

			_, err = s.ClaimIdempotencyKey(ctx, "client", "key", uuid.New(), time.Minute)
			ok(t, err, "claim")
			check("an idempotency key claimed", "INSERT push_idempotency IF@message")
			now := time.Now().UnixMilli()
			p := storage.Push{ID: uuid.Must(uuid.NewV7()), Provider: "swrve", Platform: "IOS", PushKey: "k", Message: "m",
				State: storage.PushPending, At: now, Created: now, Updated: now, Version: 1}
			ok(t, s.SavePush(ctx, p), "save push")
			next := p
			next.Version, next.State = 2, storage.PushScheduled
			ok(t, s.UpdatePush(ctx, &p, next), "update push")
			_, err = s.GetPush(ctx, p.ID)
			ok(t, err, "get push")
			ok(t, s.PutBroadcast(ctx, "b", "v1"), "put broadcast")
			_, err = s.Broadcasts(ctx)
			ok(t, err, "broadcasts")
			all = append(all, traced(t, ids.take())...)
			s.session.SetTrace(nil)

			// Every statement, the sender's included, at its class's level.
			t.Logf("%d statements traced", len(all))
			for _, st := range all {
				sh, lv, _ := strings.Cut(st, " @")
				if sh == "BATCH" {
					continue
				}
				want := level[classOf(sh)]
				if strings.HasSuffix(sh, " IF") {
					want += "/LOCAL_SERIAL"
				}
				if lv != want {
					t.Errorf("%s ran at %s, want %s", sh, lv, want)
				}
			}
		})
	}
}

// speculatedStore is a store whose reads start a speculative execution
// 1 µs after the first. The test node is alone: an execution that starts
// while the first holds it finds no node and fails at once.
func speculatedStore(t *testing.T) *Store {
	t.Helper()
	cfg := testConfig(t)
	cfg.SpeculativeAttempts, cfg.SpeculativeDelay = 1, time.Microsecond
	return newTestStoreWith(t, cfg)
}

// noConnections reports the failure of a speculative execution that found
// no node.
func noConnections(err error) bool {
	return errors.Is(err, storage.ErrUnavailable) && errors.Is(err, gocql.ErrNoConnections)
}

// TestReadsSpeculate: reads, and only reads, start speculative executions.
// The store is told two nodes are up, though the test node is alone; then
// a read's speculative execution finds no node, and gocql answers its
// failure (the hazard speculation's count of nodes avoids,
// TestSpeculationWaitsForASecondNode). Writes and LWTs never fail so.
func TestReadsSpeculate(t *testing.T) {
	s := speculatedStore(t)
	s.spec.upHosts = func() int { return 2 }
	ctx := tctx(t)
	uaid := uuid.New()
	read := 0
	for ; read < 1000; read++ {
		if _, err := s.GetUser(ctx, uaid); noConnections(err) {
			break
		} else if !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("read %d: %v", read, err)
		}
	}
	if read == 1000 {
		t.Fatal("1000 reads and no speculative execution")
	}
	t.Logf("read %d failed in its speculative execution", read)
	for i := range 200 {
		ok(t, s.AddChannel(ctx, uaid, uuid.New()), "write")
		_, err := s.ClaimIdempotencyKey(ctx, "client", uuid.NewString(), uuid.New(), time.Minute)
		ok(t, err, "LWT")
		if t.Failed() {
			t.Fatalf("write %d", i)
		}
	}
}

// TestSpeculationWaitsForASecondNode: with the test node alone, reads do
// not speculate however short the delay, so none fails for want of a
// second node.
func TestSpeculationWaitsForASecondNode(t *testing.T) {
	s := speculatedStore(t)
	ctx := tctx(t)
	uaid := uuid.New()
	for i := range 500 {
		if _, err := s.GetUser(ctx, uaid); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("read %d: %v", i, err)
		}
	}
}

// TestQueryOptions: every statement is built at its class's level, and
// the LWTs and counter increments alone are not idempotent (the driver neither retries nor
// speculates them); serial reads run at LOCAL_SERIAL.
func TestQueryOptions(t *testing.T) {
	cfg := testConfig(t)
	cfg.ReadConsistency, cfg.RouterWriteConsistency, cfg.MessageWriteConsistency = "LOCAL_ONE", "QUORUM", "ALL"
	s := newTestStoreWith(t, cfg)
	want := map[opClass]gocql.Consistency{classRead: gocql.LocalOne, classRouterWrite: gocql.Quorum, classMessageWrite: gocql.All}
	for _, st := range statements {
		q := s.query(t.Context(), st)
		if q.GetConsistency() != want[st.class] || q.IsIdempotent() == st.once {
			t.Errorf("%s: at %s, idempotent %v; want %s, %v", shape(st.cql), q.GetConsistency(), q.IsIdempotent(), want[st.class], !st.once)
		}
	}
	if q := s.serialRead(t.Context(), qGetPush); q.GetConsistency() != gocql.LocalSerial {
		t.Errorf("serial read at %s", q.GetConsistency())
	}
}
