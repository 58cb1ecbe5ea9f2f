package sender

import (
	"context"
	"strings"
	"testing"

	"github.com/autopush-go/autopush/storage"
)

// The share rule: a client holds at most capacity / (n + 1) slots, n the
// clients holding slots, itself counted. Slots a client took under a
// larger share stay its own until taken: a third client that comes after
// two flooders finds what they left.
func TestQueueShares(t *testing.T) {
	q := newQueue(12)
	take := func(client string, fair bool) (n int, last slot) {
		for {
			if last = q.reserve(client, fair); last != slotTaken {
				return n, last
			}
			n++
		}
	}
	if n, why := take("a", true); n != 6 || why != shareFull {
		t.Fatalf("a alone took %d slots (%v), want 6: half of 12", n, why)
	}
	if n, why := take("b", true); n != 4 || why != shareFull {
		t.Fatalf("b beside a took %d slots (%v), want 4: a third", n, why)
	}
	if n, why := take("c", true); n != 2 || why != queueFull {
		t.Fatalf("c took %d slots (%v), want the 2 left, then a full queue", n, why)
	}
	q.release("c")
	q.release("c")
	if _, ok := q.clients["c"]; ok {
		t.Fatal("a client with no slot left is remembered")
	}
	// Recovery takes a slot whatever the share.
	if got := q.reserve("a", false); got != slotTaken {
		t.Fatalf("unfair reserve: %v", got)
	}
}

// take reads one push of each client with pushes queued in turn, each
// client's in order, and frees their slots.
func TestQueueTurns(t *testing.T) {
	q := newQueue(100)
	for _, id := range []string{"a1", "a2", "a3", "b1", "c1", "b2"} {
		if q.reserve(id[:1], true) != slotTaken {
			t.Fatalf("no slot for %s", id)
		}
		q.put(storage.Push{Client: id[:1], PushKey: id})
	}
	var got []string
	for {
		p, ok := q.take()
		if !ok {
			break
		}
		got = append(got, p.PushKey)
		if p.PushKey == "a2" { // a client coming back joins the round at its end
			q.reserve("c", true)
			q.put(storage.Push{Client: "c", PushKey: "c2"})
		}
	}
	if s := strings.Join(got, " "); s != "a1 b1 c1 a2 b2 c2 a3" {
		t.Fatalf("order %s", s)
	}
	if q.len() != 0 || q.reserved != 0 || len(q.clients) != 0 {
		t.Fatalf("left: %d queued, %d reserved, %d clients", q.len(), q.reserved, len(q.clients))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, ok := q.nextPush(ctx); ok {
		t.Fatal("nextPush on an empty queue returned a push")
	}
	q.reserve("", true)
	q.put(storage.Push{PushKey: "bridged"})
	if p, ok := q.nextPush(context.Background()); !ok || p.PushKey != "bridged" {
		t.Fatalf("nextPush: %v %v", p.PushKey, ok)
	}
}
