package sender

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/autopush-go/autopush/storage"
)

// An account's pace is divided into shareParts parts; each sender node
// holds a whole number of them, by an entry in the account's record
// (storage.RateShares) that it renews every shareInterval. The rules
// that keep the sum of the nodes' calls under the account's rate in every
// sliding second, whatever the number of nodes (docs/sender.md, "One
// account, several nodes"):
//
//   - the record's entries never add up to more than shareParts: a node
//     takes only parts no live entry holds, by compare-and-set;
//   - a node uses more parts only after its entry says so, and its entry
//     keeps saying it holds parts it gave up for shareSettle afterwards
//     (a second, plus the plans already made at the old pace), so no
//     second sees both its old pace and another node's use of the parts;
//   - a node plans calls only before its entry's Until less shareMargin
//     and planHorizon, and others treat the entry as lapsed only
//     shareMargin after Until: a node that died or lost the store leaves
//     a gap of two margins, which covers the last second of its calls
//     when clocks agree within half a second.
const (
	shareParts = 120 // divides evenly among 2, 3, 4, 5, 6, 8, 10 and 12 nodes
	// shareMargin is the clock skew the rules tolerate, twice over.
	shareMargin = time.Second
	// shareSettle is how long parts given up stay published.
	shareSettle = time.Second + planHorizon + callSlack
	// shareInterval is how often a node renews its entry.
	shareInterval = time.Second
)

// share keeps one lane's entry in its account's record and gives the gate
// the parts it may use. One goroutine (run) drives it.
type share struct {
	l       *lane
	account string
	hold    time.Duration // an entry's life (Config.ShareHold)
	used    int           // parts the gate uses
	lowered []lowered     // parts given up lately, still published
}

type lowered struct {
	parts int
	until time.Time
}

func newShare(l *lane, hold time.Duration) *share {
	return &share{l: l, account: l.p.Name(), hold: hold}
}

// run renews the entry every shareInterval until ctx ends. A node started
// again under the same name takes its earlier run's entry back, which may
// have been in use until a moment ago, so it keeps publishing those parts
// until they settle.
// It calls tried after the first attempt, whatever its outcome.
func (sh *share) run(ctx context.Context, tried func()) {
	first := true
	t := time.NewTicker(shareInterval)
	defer t.Stop()
	for {
		if err := sh.tick(ctx, first); err != nil && ctx.Err() == nil {
			sh.l.s.m.storageError(stageShare)
			sh.l.s.log.Warn("rate share not renewed", "provider", sh.account, "error", err)
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
func (sh *share) tick(ctx context.Context, first bool) error {
	var err error
	for range 4 {
		err = sh.renew(ctx, first)
		if !errors.Is(err, storage.ErrConflict) && !errors.Is(err, storage.ErrUnavailable) || ctx.Err() != nil {
			return err
		}
	}
	return err
}

func (sh *share) renew(ctx context.Context, first bool) error {
	s := sh.l.s
	rctx, cancel := context.WithTimeout(ctx, s.cfg.StoreTimeout)
	defer cancel()
	rec, err := s.store.GetRateShares(rctx, sh.account)
	if err != nil {
		return err
	}
	now := time.Now()
	var others []storage.RateShare
	held := 0
	for _, e := range rec.Nodes {
		switch {
		case e.Node == s.node:
			if first && e.Until > now.UnixMilli() {
				sh.lowered = append(sh.lowered, lowered{e.Parts, now.Add(shareSettle)})
			}
		case time.UnixMilli(e.Until).Add(shareMargin).After(now):
			others = append(others, e)
			held += e.Parts
		}
	}
	want := min(fairParts(s.node, others), max(0, shareParts-held))
	if _, usable := sh.l.gate.share(); sh.used > 0 && now.Sub(usable) > shareSettle {
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
	until := now.Add(sh.hold)
	next := storage.RateShares{Account: sh.account, Version: rec.Version + 1,
		Nodes: append(others, storage.RateShare{Node: s.node, Parts: pub, Until: until.UnixMilli()})}
	if err := s.store.PutRateShares(rctx, rec.Version, next); err != nil {
		return err
	}
	sh.used = want
	sh.l.gate.set(want, until.Add(-shareMargin-planHorizon))
	return nil
}

// release publishes, once the lane's last calls are made, that this node
// gives its parts up: its entry lapses a settle later, when no second can
// hold both its calls and another node's.
func (sh *share) release(ctx context.Context) {
	s := sh.l.s
	sh.l.gate.set(0, time.Time{})
	for range 4 {
		rctx, cancel := context.WithTimeout(ctx, s.cfg.StoreTimeout)
		rec, err := s.store.GetRateShares(rctx, sh.account)
		if err == nil {
			now := time.Now()
			next := storage.RateShares{Account: sh.account, Version: rec.Version + 1}
			for _, e := range rec.Nodes {
				if e.Node == s.node {
					e.Until = min(e.Until, now.Add(shareSettle-shareMargin).UnixMilli())
				}
				next.Nodes = append(next.Nodes, e)
			}
			err = s.store.PutRateShares(rctx, rec.Version, next)
		}
		cancel()
		if !errors.Is(err, storage.ErrConflict) {
			return
		}
	}
}

// fairParts is node's fair part of shareParts among itself and others:
// an equal part each, the remainder to the first nodes by name.
func fairParts(node string, others []storage.RateShare) int {
	n := len(others) + 1
	rank := 0
	for _, e := range others {
		if e.Node < node {
			rank++
		}
	}
	part := shareParts / n
	if rank < shareParts%n {
		part++
	}
	return part
}
