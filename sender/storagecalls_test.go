package sender_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gocql/gocql"
	"github.com/google/uuid"

	"github.com/autopush-go/autopush/sender"
	"github.com/autopush-go/autopush/storage"
	"github.com/autopush-go/autopush/storage/scylla/cqltest"
)

// statements counts the first attempt of each CQL statement a store
// makes, by kind.
type statements struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *statements) ObserveQuery(_ context.Context, q gocql.ObservedQuery) {
	if q.Attempt != 0 {
		return // a driver retry: not a statement the caller made
	}
	s := strings.Join(strings.Fields(q.Statement), " ")
	var kind string
	switch {
	case strings.Contains(s, "sender_rate"):
		kind = "share" // the rate share's renewal: per second, not per push
	case strings.Contains(s, " IF "):
		kind = "lwt"
	case strings.HasPrefix(s, "UPDATE push ") || strings.HasPrefix(s, "INSERT INTO push "):
		kind = "push write"
	case strings.HasPrefix(s, "INSERT INTO push_state") || strings.HasPrefix(s, "DELETE FROM push_state"):
		kind = "index write"
	case strings.HasPrefix(s, "INSERT INTO push_by_key") || strings.HasPrefix(s, "INSERT INTO push_open") ||
		strings.HasPrefix(s, "DELETE FROM push_open"):
		kind = "client index write" // the push API's (storage/scylla/pushindex.go)
	case strings.Contains(s, " FROM push_state "):
		kind = "index read"
	case strings.Contains(s, " FROM push "):
		kind = "push read"
	default:
		kind = "other"
	}
	c.mu.Lock()
	c.n[kind]++
	c.mu.Unlock()
}

// of is the count of kind so far.
func (c *statements) of(kind string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[kind]
}

func (c *statements) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.n
	c.n = map[string]int{}
	return m
}

// TestStatementsPerPush counts the CQL statements a push costs on its way
// to SENT, immediate (accepted by the sending node: create, attempt,
// outcome) and pending (accepted by a node without workers, then claimed),
// and holds the lightweight transactions (LWT, four round trips between
// replicas each) to the ones correctness needs: the claim and the
// attempt's start, which fence other nodes, and the outcome, a write over
// a Paxos-written row (see storage/scylla/pushes.go). The create is a
// plain write.
func TestStatementsPerPush(t *testing.T) {
	cfg := cqltest.Keyspace(t, "stmts")
	count := &statements{n: map[string]int{}}
	open := func(observe bool) storage.Store {
		c := cfg
		if observe {
			c.QueryObserver = count
		}
		return openCQL(t, c)
	}
	fake := startFake(t)
	const n = 200
	node := testConfig("node-a")
	node.Lease = time.Minute // far from expiry: no takeover reads find anything
	worker := startSender(t, open(true), fake, node)
	api := testConfig("api")
	api.Workers = false
	front := startSender(t, open(true), fake, api)
	watch := open(false)
	for _, path := range []struct {
		name      string
		accept    *sender.Sender
		state     storage.PushState
		lwt, push int // per push
		// The push API's indexes: two by-key entries at the create and
		// again (with the TTL) at the end, the open entry added and
		// deleted.
		clientIndex int
	}{
		{"immediate", worker, storage.PushInMemory, 2, 1, 6},
		{"pending", front, storage.PushPending, 3, 1, 6},
	} {
		count.take()
		ids := make([]uuid.UUID, n)
		t0 := time.Now()
		for i := range n {
			p, err := path.accept.Accept(context.Background(), hello(fmt.Sprintf("%s%03d", path.name, i)))
			if err != nil || p.State != path.state {
				t.Fatalf("%s: accept: %v, %s", path.name, err, p.State)
			}
			ids[i] = p.ID
		}
		accepted := time.Since(t0)
		for _, id := range ids {
			waitStored(t, watch, id, storage.PushSent)
		}
		// The final write's client index entries go beside it and are
		// observed once answered: a push seen SENT may still have them on
		// the wire. Wait for them (not past 10 s) before counting, so they
		// are not counted in the next path's.
		for end := time.Now().Add(10 * time.Second); count.of("client index write") < path.clientIndex*n && time.Now().Before(end); {
			time.Sleep(10 * time.Millisecond) // polling the observer's count
		}
		got := count.take()
		t.Logf("%s: %d pushes accepted one after another in %s (%.2f ms each), all SENT %s after the first",
			path.name, n, accepted.Round(time.Millisecond), float64(accepted.Microseconds())/1000/n, time.Since(t0).Round(time.Millisecond))
		per := func(k string) float64 { return float64(got[k]) / n }
		t.Logf("%s: per push: %.2f LWT, %.2f plain push writes, %.2f index writes, %.2f client index writes, %.2f push reads; %d index reads in all (the jobs' polls), %d of the rate share (its renewals, each second)",
			path.name, per("lwt"), per("push write"), per("index write"), per("client index write"), per("push read"), got["index read"], got["share"])
		if got["lwt"] != path.lwt*n || got["push write"] != path.push*n || got["client index write"] != path.clientIndex*n {
			t.Errorf("%s: %d LWTs, %d plain push writes and %d client index writes for %d pushes, want %d, %d and %d per push",
				path.name, got["lwt"], got["push write"], got["client index write"], n, path.lwt, path.push, path.clientIndex)
		}
	}
}

// waitStored polls store (not a sender) until the push is in want.
func waitStored(t *testing.T, store storage.Store, id uuid.UUID, want storage.PushState) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		p, err := store.GetPush(context.Background(), id)
		if err == nil && p.State == want {
			return
		}
		if err == nil && p.State.Final() || time.Now().After(deadline) {
			t.Fatalf("push %s is %s (%v), want %s", id, p.State, err, want)
		}
		time.Sleep(20 * time.Millisecond) // polling the store's answer
	}
}
