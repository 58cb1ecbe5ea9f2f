package sender_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/autopush-go/autopush/sender"
	"github.com/autopush-go/autopush/sender/sendertest/swrvefake"
	"github.com/autopush-go/autopush/storage"
)

// parts is a node's share of Swrve's pace now, by its gauge.
func parts(s *sender.Sender) int {
	n, _ := strconv.Atoi(metricOf(s, `autosender_share_parts{provider="swrve"}`))
	return n
}

// published is the parts the live entries of the Swrve account's record
// hold, all nodes together.
func published(t *testing.T, store storage.Store) int {
	t.Helper()
	rec, err := store.GetRateShares(context.Background(), "swrve")
	if err != nil {
		t.Fatal(err)
	}
	sum := 0
	for _, e := range rec.Nodes {
		if time.UnixMilli(e.Until).Add(time.Second).After(time.Now()) {
			sum += e.Parts
		}
	}
	return sum
}

// watchShares polls the nodes' gauges and the record until done reports
// true, failing whenever the nodes use, or the record publishes, more
// than the whole pace (120 parts).
func watchShares(t *testing.T, store storage.Store, what string, done func() bool, nodes ...*sender.Sender) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !done(); {
		used := 0
		for _, s := range nodes {
			used += parts(s)
		}
		if pub := published(t, store); used > shareWhole || pub > shareWhole {
			t.Fatalf("%s: the nodes use %d parts, the record publishes %d; at most %d", what, used, pub, shareWhole)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached in a minute (parts in use: %d)", what, used)
		}
		time.Sleep(20 * time.Millisecond) // polling gauges and the record
	}
}

// TestSharesJoinAndLeave: a node alone uses the whole pace; a second one
// joining gets half once the first has given it up, a leaving one's half
// goes back; never do the nodes use, or their record publish, more than
// the whole.
func TestSharesJoinAndLeave(t *testing.T) {
	backends(t, func(t *testing.T, newStore func(*testing.T) storage.Store) {
		store := newStore(t)
		fake := startFake(t)
		a := startSender(t, store, fake, testConfig("node-a"))
		watchShares(t, store, "alone", func() bool { return parts(a) == shareWhole }, a)
		b := startSender(t, store, fake, testConfig("node-b"))
		watchShares(t, store, "joined", func() bool { return parts(a) == shareWhole/2 && parts(b) == shareWhole/2 }, a, b)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := b.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		watchShares(t, store, "left", func() bool { return parts(a) == shareWhole }, a, b)
	})
}

// flakyShares fails the rate shares' reads and writes while cut is set:
// a node that lost the store.
type flakyShares struct {
	storage.Store
	cut atomic.Bool
}

var errCut = errors.New("cut off (test)")

func (f *flakyShares) GetRateShares(ctx context.Context, account string) (storage.RateShares, error) {
	if f.cut.Load() {
		return storage.RateShares{}, errCut
	}
	return f.Store.GetRateShares(ctx, account)
}

func (f *flakyShares) PutRateShares(ctx context.Context, prev int64, next storage.RateShares) error {
	if f.cut.Load() {
		return errCut
	}
	return f.Store.PutRateShares(ctx, prev, next)
}

// TestShareOfALostNode: a node that can no longer renew its share stops
// using it before it lapses, and the other takes it only a margin after:
// more than a second passes between the one's last use and the other's
// first, so no second holds both. Back, the node gets its part again
// without the record ever publishing more than the whole.
func TestShareOfALostNode(t *testing.T) {
	backends(t, func(t *testing.T, newStore func(*testing.T) storage.Store) {
		store := newStore(t)
		fake := startFake(t)
		lost := &flakyShares{Store: store}
		cfg := testConfig("node-a")
		cfg.ShareHold = 4 * time.Second
		a := startSender(t, lost, fake, cfg)
		cfg.Node = "node-b"
		b := startSender(t, store, fake, cfg)
		watchShares(t, store, "shared", func() bool { return parts(a) == shareWhole/2 && parts(b) == shareWhole/2 }, a, b)
		lost.cut.Store(true)
		var stopped time.Time
		watchShares(t, store, "node a stops", func() bool {
			if parts(a) == 0 && stopped.IsZero() {
				stopped = time.Now()
			}
			return !stopped.IsZero()
		}, a, b)
		if parts(b) != shareWhole/2 {
			t.Fatalf("node b took node a's parts (%d) before node a stopped using them", parts(b))
		}
		watchShares(t, store, "node b takes them", func() bool { return parts(b) == shareWhole }, a, b)
		if gap := time.Since(stopped); gap < time.Second {
			t.Fatalf("node b took node a's parts %s after node a stopped using them; want more than a second", gap)
		}
		// Node a back: it asks for its part again, never claiming what it
		// no longer holds.
		lost.cut.Store(false)
		watchShares(t, store, "node a back", func() bool { return parts(a) == shareWhole/2 && parts(b) == shareWhole/2 }, a, b)
	})
}

// failFirstTry fails each write of the rate shares that is not a retry
// (none came in the last half second) as a store that timed out would
// (storage.ErrUnavailable): every renewal's first write fails.
type failFirstTry struct {
	storage.Store
	mu   sync.Mutex
	last time.Time
	puts int
}

func (f *failFirstTry) PutRateShares(ctx context.Context, prev int64, next storage.RateShares) error {
	f.mu.Lock()
	retry := time.Since(f.last) < 500*time.Millisecond
	f.last = time.Now()
	f.puts++
	f.mu.Unlock()
	if !retry {
		return fmt.Errorf("put rate shares: %w (test)", storage.ErrUnavailable)
	}
	return f.Store.PutRateShares(ctx, prev, next)
}

func (f *failFirstTry) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.puts
}

// TestShareRenewalTriesAgain: a renewal whose write fails as unavailable
// (a compare-and-set that timed out) is tried again at once, so a node
// whose every first write fails keeps its share. Without it every
// renewal failed, and the share lapsed after its hold.
func TestShareRenewalTriesAgain(t *testing.T) {
	backends(t, func(t *testing.T, newStore func(*testing.T) storage.Store) {
		store := &failFirstTry{Store: newStore(t)}
		cfg := testConfig("node-a")
		cfg.ShareHold = 4 * time.Second
		a := startSender(t, store, startFake(t), cfg)
		watchShares(t, store.Store, "held", func() bool { return parts(a) == shareWhole }, a)
		// Past three holds' worth of renewals, the share never lapsed.
		from := store.count()
		watchShares(t, store.Store, "renewed", func() bool {
			if parts(a) != shareWhole {
				t.Fatalf("the share lapsed (%d parts) with every other write failing", parts(a))
			}
			return store.count()-from >= 2*12
		}, a)
	})
}

// TestStopGivesTheShareUpAtOnce: a node told to stop while its calls
// hang at the provider gives its share up at once, not once they end:
// the other node paces at the whole account's rate while the stopping
// one still waits for its calls; never do the nodes use, or their record
// publish, more than the whole. Before, a stop kept its share until its
// calls in flight ended (or its hold ran out when they did not).
func TestStopGivesTheShareUpAtOnce(t *testing.T) {
	backends(t, func(t *testing.T, newStore func(*testing.T) storage.Store) {
		store := newStore(t)
		fake := startFake(t)
		release := make(chan struct{})
		fake.SetFaults(func(r swrvefake.Received) swrvefake.Fault {
			if r.User == "hangs" {
				return swrvefake.Fault{Until: release} // answered when the test says
			}
			return swrvefake.Fault{}
		})
		// A timeout the hung call does not reach; a share that lasts
		// longer than the call unless given up.
		cfg, sc := testConfig("node-a"), swrveConfig(fake.URL())
		cfg.Lease, sc.Timeout, cfg.ShareHold = time.Minute, 25*time.Second, time.Minute
		a := launchSwrve(t, store, sc, cfg)
		<-a.Ready()
		cfg.Node = "node-b"
		b := launchSwrve(t, store, sc, cfg)
		<-b.Ready()
		watchShares(t, store, "shared", func() bool { return parts(a) == shareWhole/2 && parts(b) == shareWhole/2 }, a, b)
		if _, err := a.Accept(context.Background(), hello("hangs")); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := fake.WaitCount(ctx, 1); err != nil {
			t.Fatal(err)
		}
		stopped := make(chan error, 1)
		go func() { stopped <- a.Stop(ctx) }()
		watchShares(t, store, "given up while a call hangs", func() bool { return parts(b) == shareWhole }, a, b)
		select {
		case err := <-stopped:
			t.Fatalf("node-a's stop returned (%v) while its call hung", err)
		default:
		}
		close(release)
		if err := <-stopped; err != nil {
			t.Fatalf("node-a's stop once its call answered: %v", err)
		}
	})
}
