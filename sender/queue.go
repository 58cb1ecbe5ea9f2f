package sender

import (
	"context"
	"sync"

	"github.com/autopush-go/autopush/storage"
)

// queue is a lane's bounded queue, fair between the push API's clients
// (docs/sender.md, "Fairness"): one FIFO per client (the WebPush tier's
// bridged pushes, Client "", are one more client), read in turn, one push
// of each client with pushes queued per round. A client may hold at most
// its share of the slots, capacity / (n + 1), n being the clients holding
// slots, itself counted: alone, half; with one other, a third each. A
// share is left free for a client that comes, so one client's backlog
// cannot take every slot.
//
// Slots are reserved (reserve) before a push is stored IN_MEMORY, then
// filled (put), which never blocks; take frees the slot of the push it
// returns. Safe for concurrent use; one reader calls nextPush.
type queue struct {
	capacity int
	ready    chan struct{} // holds one token when a push was put since the reader last looked

	mu       sync.Mutex
	reserved int                     // slots reserved or filled, all clients: <= capacity
	filled   int                     // pushes put and not taken
	clients  map[string]*clientQueue // the clients holding slots
	turn     []*clientQueue          // the clients with pushes filled, in reading order
	next     int                     // the index in turn of the client read next
}

// clientQueue is one client's part of the queue.
type clientQueue struct {
	name     string
	reserved int            // its slots reserved or filled
	pushes   []storage.Push // filled, oldest first
}

// slot is what reserve found.
type slot int

const (
	slotTaken slot = iota // a slot is the caller's
	shareFull             // the client holds its share: another client's push may still find one
	queueFull             // no slot is free (or the queue is closed: lane.reserve)
)

func newQueue(capacity int) *queue {
	return &queue{capacity: capacity, ready: make(chan struct{}, 1), clients: map[string]*clientQueue{}}
}

// share is the most slots a client may hold while n clients hold slots,
// itself counted.
func (q *queue) share(n int) int { return max(1, q.capacity/(n+1)) }

// reserve takes a slot for client if one is free and, when fair, the
// client holds less than its share. Recovery reserves unfairly: it takes
// back this node's own pushes before the queue opens.
func (q *queue) reserve(client string, fair bool) slot {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.reserved >= q.capacity {
		return queueFull
	}
	c := q.clients[client]
	if fair {
		n, held := len(q.clients), 0
		if c == nil {
			n++
		} else {
			held = c.reserved
		}
		if held >= q.share(n) {
			return shareFull
		}
	}
	if c == nil {
		c = &clientQueue{name: client}
		q.clients[client] = c
	}
	c.reserved++
	q.reserved++
	return slotTaken
}

// release gives back a slot of client's that will not be filled.
func (q *queue) release(client string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.unreserve(q.clients[client])
}

// unreserve frees one of c's slots, forgetting c when it holds none.
// Called with mu held.
func (q *queue) unreserve(c *clientQueue) {
	c.reserved--
	q.reserved--
	if c.reserved == 0 {
		delete(q.clients, c.name)
	}
}

// put fills a slot reserved for p.Client; it never blocks.
func (q *queue) put(p storage.Push) {
	q.mu.Lock()
	c := q.clients[p.Client]
	if len(c.pushes) == 0 {
		q.turn = append(q.turn, c)
	}
	c.pushes = append(c.pushes, p)
	q.filled++
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default: // the reader has a token to look already
	}
}

// take returns the next push in turn and frees its slot; false when none
// is queued.
func (q *queue) take() (storage.Push, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.turn) == 0 {
		return storage.Push{}, false
	}
	if q.next >= len(q.turn) {
		q.next = 0
	}
	c := q.turn[q.next]
	p := c.pushes[0]
	c.pushes[0] = storage.Push{} // not kept alive by the backing array
	c.pushes = c.pushes[1:]
	q.filled--
	if len(c.pushes) == 0 {
		// Out of the turn; next now names the client after it.
		q.turn = append(q.turn[:q.next], q.turn[q.next+1:]...)
		c.pushes = nil
	} else {
		q.next++
	}
	q.unreserve(c)
	return p, true
}

// nextPush waits for a push and takes it (take); false when ctx ended
// first.
// One reader only.
func (q *queue) nextPush(ctx context.Context) (storage.Push, bool) {
	for ctx.Err() == nil {
		if p, ok := q.take(); ok {
			return p, true
		}
		select {
		case <-q.ready:
		case <-ctx.Done():
		}
	}
	return storage.Push{}, false // stopping: what is queued is handed back
}

// takeUpTo takes up to n pushes in turn (take).
func (q *queue) takeUpTo(n int) []storage.Push {
	var out []storage.Push
	for len(out) < n {
		p, ok := q.take()
		if !ok {
			break
		}
		out = append(out, p)
	}
	return out
}

// len is the number of pushes queued.
func (q *queue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.filled
}
