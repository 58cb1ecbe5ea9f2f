package ratelimit

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/autopush-go/autopush/storage"
)

// An account's pace is divided into ShareParts parts; each sender node
// holds a whole number of them, by an entry in the account's record
// (storage.RateShares) that it renews every shareInterval. The rules
// that keep the sum of the nodes' calls under the account's rate in every
// sliding second, whatever the number of nodes (docs/sender.md, "One
// account, several nodes"):
//
//   - the record's entries never add up to more than ShareParts: a node
//     takes only parts no live entry holds, by compare-and-set;
//   - a node uses more parts only after its entry says so, and its entry
//     keeps saying it holds parts it gave up for shareSettle afterwards
//     (a second, plus the plans already made at the old pace), so no
//     second sees both its old pace and another node's use of the parts;
//   - a node plans calls only before its entry's Until less shareMargin
//     and PlanHorizon, and others treat the entry as lapsed only
//     shareMargin after Until: a node that died or lost the store leaves
//     a gap of two margins, which covers the last second of its calls
//     when clocks agree within half a second.
const (
	// ShareParts is how many parts an account's pace is divided into.
	ShareParts = 120 // divides evenly among 2, 3, 4, 5, 6, 8, 10 and 12 nodes
	// shareMargin is the clock skew the rules tolerate, twice over.
	shareMargin = time.Second
	// shareSettle is how long parts given up stay published.
	shareSettle = time.Second + PlanHorizon + CallSlack
	// shareInterval is how often a node renews its entry.
	shareInterval = time.Second
	// MinShareHold is the shortest life an entry may have: two margins,
	// the plan horizon and a renewal (a shorter one lapses before its
	// node may use it).
	MinShareHold = 2*shareMargin + PlanHorizon + shareInterval
)

// ShareStore is the part of the store a NodeShare uses: the accounts'
// records of rate shares (storage.PushStore).
type ShareStore interface {
	GetRateShares(ctx context.Context, account string) (storage.RateShares, error)
	PutRateShares(ctx context.Context, prev int64, next storage.RateShares) error
}

// ShareConfig is what a NodeShare is made of; the sender fills it from
// its own, validated, Config.
type ShareConfig struct {
	Store ShareStore
	// Node is this node's name in the record (the sender's lease owner).
	Node string
	// Account is the provider account whose pace is shared ("swrve").
	Account string
	// Hold is an entry's life (sender-share-hold), at least MinShareHold.
	Hold time.Duration
	// StoreTimeout bounds each storage call (sender-store-timeout).
	StoreTimeout time.Duration
	// Failed is told of each renewal that failed (nil: nobody).
	Failed func(error)
}

// NodeShare limits this node to its part of an account's pace, whatever
// the number of sender nodes: it keeps the node's entry in the account's
// record and gives the gate the parts it may use. One goroutine (Run)
// drives it; Release may be called from another.
type NodeShare struct {
	cfg     ShareConfig
	gate    *CallGate
	used    int       // parts the gate uses
	lowered []lowered // parts given up lately, still published
}

type lowered struct {
	parts int
	until time.Time
}

// NewNodeShare makes the share that gives gate its parts.
func NewNodeShare(cfg ShareConfig, gate *CallGate) *NodeShare {
	return &NodeShare{cfg: cfg, gate: gate}
}

// Run renews the entry every shareInterval until ctx ends. A node started
// again under the same name takes its earlier run's entry back, which may
// have been in use until a moment ago, so it keeps publishing those parts
// until they settle.
// It calls tried after the first attempt, whatever its outcome.
func (sh *NodeShare) Run(ctx context.Context, tried func()) {
	first := true
	t := time.NewTicker(shareInterval)
	defer t.Stop()
	for {
		if err := sh.tick(ctx, first); err != nil && ctx.Err() == nil {
			if sh.cfg.Failed != nil {
				sh.cfg.Failed(err)
			}
		} else {
			first = false
		}
		if tried != nil {
			tried()
			tried = nil
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// tick reads the record and writes this node's entry: its fair part of
// what the live entries leave free. Conflicting writes of other nodes
// are met by reading again; so is a write that failed as unavailable (a
// compare-and-set that timed out may have landed or not, and the store
// never retries one): the read tells, and the next write is conditional
// on it, so trying again is safe. Several nodes renewing one record every
// second contend on it, and a share that misses renewals for its hold
// lapses (its node then accepts pushes PENDING).
func (sh *NodeShare) tick(ctx context.Context, first bool) error {
	var err error
	for range 4 {
		err = sh.renew(ctx, first)
		if !errors.Is(err, storage.ErrConflict) && !errors.Is(err, storage.ErrUnavailable) || ctx.Err() != nil {
			return err
		}
	}
	return err
}

func (sh *NodeShare) renew(ctx context.Context, first bool) error {
	c := &sh.cfg
	rctx, cancel := context.WithTimeout(ctx, c.StoreTimeout)
	defer cancel()
	rec, err := c.Store.GetRateShares(rctx, c.Account)
	if err != nil {
		return err
	}
	now := time.Now()
	var others []storage.RateShare
	held := 0
	for _, e := range rec.Nodes {
		switch {
		case e.Node == c.Node:
			if first && e.Until > now.UnixMilli() {
				sh.lowered = append(sh.lowered, lowered{e.Parts, now.Add(shareSettle)})
			}
		case time.UnixMilli(e.Until).Add(shareMargin).After(now):
			others = append(others, e)
			held += e.Parts
		}
	}
	want := min(fairParts(c.Node, others), max(0, ShareParts-held))
	if _, usable := sh.gate.share(); sh.used > 0 && now.Sub(usable) > shareSettle {
		// The share lapsed (the store was out of reach) long enough ago
		// that its last calls have settled: nothing of it is in use, and
		// others may hold its parts by now.
		sh.used, sh.lowered = 0, nil
	}
	pub := want
	sh.lowered = slices.DeleteFunc(sh.lowered, func(x lowered) bool { return !x.until.After(now) })
	if want < sh.used {
		sh.lowered = append(sh.lowered, lowered{sh.used, now.Add(shareSettle)})
	}
	for _, x := range sh.lowered {
		pub = max(pub, x.parts)
	}
	until := now.Add(c.Hold)
	next := storage.RateShares{Account: c.Account, Version: rec.Version + 1,
		Nodes: append(others, storage.RateShare{Node: c.Node, Parts: pub, Until: until.UnixMilli()})}
	if err := c.Store.PutRateShares(rctx, rec.Version, next); err != nil {
		return err
	}
	sh.used = want
	sh.gate.set(want, until.Add(-shareMargin-PlanHorizon))
	return nil
}

// Release publishes that this node gives its parts up (it stops): its
// entry lapses a settle later, when no second can hold both its calls
// and another node's.
func (sh *NodeShare) Release(ctx context.Context) {
	c := &sh.cfg
	sh.gate.set(0, time.Time{})
	for range 4 {
		rctx, cancel := context.WithTimeout(ctx, c.StoreTimeout)
		rec, err := c.Store.GetRateShares(rctx, c.Account)
		if err == nil {
			now := time.Now()
			next := storage.RateShares{Account: c.Account, Version: rec.Version + 1}
			for _, e := range rec.Nodes {
				if e.Node == c.Node {
					e.Until = min(e.Until, now.Add(shareSettle-shareMargin).UnixMilli())
				}
				next.Nodes = append(next.Nodes, e)
			}
			err = c.Store.PutRateShares(rctx, rec.Version, next)
		}
		cancel()
		if !errors.Is(err, storage.ErrConflict) {
			return
		}
	}
}

// fairParts is node's fair part of ShareParts among itself and others:
// an equal part each, the remainder to the first nodes by name.
func fairParts(node string, others []storage.RateShare) int {
	n := len(others) + 1
	rank := 0
	for _, e := range others {
		if e.Node < node {
			rank++
		}
	}
	part := ShareParts / n
	if rank < ShareParts%n {
		part++
	}
	return part
}
