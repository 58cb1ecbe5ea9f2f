// Package tracking is the endpoint node's side of tracked messages
// (docs/receipts.md): a push signed with one of tracking-keys, or naming
// a receipt subscription (Push-Receipt, apitier/receipts), gets a fate
// record before it is routed (storage.FateStore). This node records what
// it sees of it: received, handed to a connection node, stored, dropped
// at TTL 0, refused, and the older tracked versions of a topic a stored
// message replaces. The connection node records the write to its client
// and the ack; Sweep, run by every endpoint node, settles what outlived
// its TTL. The counts of every milestone are served on /metrics and
// /__milestones__ (the operator's listener); with reference-milestones,
// the counts by current state in the reference's shape on the endpoint's
// own /__milestones__ (reference.go). With no tracking key and receipts
// off nothing here runs: an untracked push pays one test.
package tracking

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/google/uuid"

	"github.com/autopush-go/autopush/internal/protocol"
	"github.com/autopush-go/autopush/internal/vapid"
	"github.com/autopush-go/autopush/storage"
)

// Store is what tracking reads and writes.
type Store interface {
	Track(ctx context.Context, f storage.Fate) error
	Reach(ctx context.Context, uaid uuid.UUID, id storage.FateID, s storage.FateState) (bool, error)
	Settle(ctx context.Context, uaid uuid.UUID, id storage.FateID, s storage.FateState, reason storage.DropReason) (bool, error)
	SettleTopic(ctx context.Context, uaid, chid uuid.UUID, topic string, keep storage.FateID) (int, error)
	SettleExpired(ctx context.Context, now time.Time, limit int) (int, error)
	GetFate(ctx context.Context, uaid uuid.UUID, id storage.FateID) (storage.Fate, error)
	MilestoneCounts(ctx context.Context) (map[storage.Milestone]int64, error)
	LiveCounts(ctx context.Context) (map[storage.FateState]int64, error)
}

// Config is what tracking reads of the node's settings.
type Config struct {
	// Keys are tracking-keys: VAPID public keys, base64url.
	Keys []string
	// Receipts is receipts: pushes may name receipt subscriptions.
	Receipts bool
	// SweepInterval is fate-sweep-interval.
	SweepInterval time.Duration
	// StorageTimeout bounds each storage call.
	StorageTimeout time.Duration
}

// Metric names.
const (
	// mMilestones{milestone}: tracked messages that reached each
	// milestone, summed over every node (read from storage when scraped).
	mMilestones = "autopush_milestones_total"
	// mFateErrors: a tracked push's milestone (handed to a node, stored,
	// dropped, replaced, expired) that storage could not record.
	mFateErrors = "autoendpoint_fate_errors_total"
	// mLostCounts: milestone increments this node's storage client
	// could not apply (a CQL counter write that failed is never retried:
	// it may have applied). The milestones may be short by its sum over
	// the nodes; never counted twice.
	mLostCounts = "autoendpoint_milestone_counts_lost_total"
)

// lostCounter is a store whose milestone counts can fall short
// (scylla's counters); one without it keeps them exact.
type lostCounter interface{ LostMilestoneCounts() int64 }

// Tracker decides which pushes are tracked and records their fates.
// Goroutine-safe.
type Tracker struct {
	cfg    Config
	keys   map[[32]byte]bool // sha256 of each key
	store  Store
	log    *slog.Logger
	set    *metrics.Set
	errors *metrics.Counter
}

// ParseKeys reads tracking-keys into the set of their sha256 sums.
func ParseKeys(list []string) (map[[32]byte]bool, error) {
	set := make(map[[32]byte]bool, len(list))
	for _, k := range list {
		raw, err := vapid.DecodeKey(k)
		if err != nil {
			return nil, fmt.Errorf("tracking-keys: %q: %w", k, err)
		}
		set[sha256.Sum256(raw)] = true
	}
	return set, nil
}

// New makes a Tracker.
func New(cfg Config, store Store, log *slog.Logger) (*Tracker, error) {
	keys, err := ParseKeys(cfg.Keys)
	if err != nil {
		return nil, err
	}
	t := &Tracker{cfg: cfg, keys: keys, store: store, log: log, set: metrics.NewSet()}
	t.errors = t.set.NewCounter(mFateErrors)
	return t, nil
}

// On reports whether any push may be tracked here.
func (t *Tracker) On() bool { return len(t.keys) > 0 || t.cfg.Receipts }

// Tracks reports whether pushes signed with the key whose sha256 is
// keyHash are tracked for the milestones.
func (t *Tracker) Tracks(keyHash [32]byte) bool { return t.keys[keyHash] }

// Track records the fate of the push n of uaid before it is routed, with
// its receipt subscription (zero: none), and marks n Tracked for the
// node. On an error the push must fail (503): a receipt was asked for,
// or the operator counts this key, and neither could be kept.
func (t *Tracker) Track(ctx context.Context, uaid uuid.UUID, n *protocol.Notification, sub storage.ReceiptSubID, now time.Time) error {
	chid, _ := protocol.ParseChannelID(n.ChannelID)
	err := t.store.Track(ctx, storage.Fate{
		UAID: uaid, ID: storage.NewFateID(n.Version), CHID: chid, Topic: n.Topic, MessageID: n.Version,
		Expiry: now.Add(time.Duration(n.TTL) * time.Second), Receipt: sub, State: storage.FateReceived,
	})
	if err == nil {
		n.Tracked = true
	}
	return err
}

// Reached records that the tracked push n reached state: handed to a
// node, stored, or (terminal) dropped at TTL 0 as expired, or errored
// when its application server was answered an error. A failure is logged
// and counted: the push's answer stands, and its fate settles later.
func (t *Tracker) Reached(ctx context.Context, uaid uuid.UUID, n *protocol.Notification, state storage.FateState) {
	id := storage.NewFateID(n.Version)
	var err error
	if state.Terminal() {
		_, err = t.store.Settle(ctx, uaid, id, state, storage.DropNone)
	} else {
		_, err = t.store.Reach(ctx, uaid, id, state)
	}
	if err != nil {
		t.failed("record a tracked push's "+state.String(), err)
	}
}

// Replaced settles the tracked messages the topic message n, tracked or
// not, was just stored over (RFC 8030 §5.4: they get no delivery
// receipt).
func (t *Tracker) Replaced(ctx context.Context, uaid uuid.UUID, n *protocol.Notification) {
	chid, _ := protocol.ParseChannelID(n.ChannelID)
	if _, err := t.store.SettleTopic(ctx, uaid, chid, n.Topic, storage.NewFateID(n.Version)); err != nil {
		t.failed("settle replaced topic messages", err)
	}
}

// Withdrawn settles the tracked message messageID of uaid, just deleted
// from storage by its application server (DELETE /m/{id}), as dropped,
// withdrawn, if it was stored there. One handed to a node or written to
// its user agent is left to its ack or expiry: the delete did not reach
// it. (A user agent reading its stored messages at the very moment of
// the delete can still get it, receipted withdrawn.) An untracked
// message has no fate: nothing to do.
func (t *Tracker) Withdrawn(ctx context.Context, uaid uuid.UUID, messageID string) {
	id := storage.NewFateID(messageID)
	f, err := t.store.GetFate(ctx, uaid, id)
	switch {
	case errors.Is(err, storage.ErrNotFound):
		return
	case err != nil:
		t.failed("read a withdrawn message's fate", err)
		return
	case f.State != storage.FateStored:
		return
	}
	if _, err := t.store.Settle(ctx, uaid, id, storage.FateDropped, storage.DropWithdrawn); err != nil {
		t.failed("settle a withdrawn message", err)
	}
}

func (t *Tracker) failed(what string, err error) {
	t.errors.Inc()
	t.log.Warn(what, "error", err)
}

// sweepPage bounds one SettleExpired call.
const sweepPage = 1000

// Sweep settles expired fates every SweepInterval until stop closes.
func (t *Tracker) Sweep(stop <-chan struct{}) {
	tick := time.NewTicker(t.cfg.SweepInterval)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		for {
			ctx, cancel := context.WithTimeout(context.Background(), t.cfg.StorageTimeout)
			n, err := t.store.SettleExpired(ctx, time.Now(), sweepPage)
			cancel()
			if err != nil {
				t.failed("settle expired tracked messages", err)
			}
			if err != nil || n < sweepPage {
				break
			}
		}
	}
}

// counts reads the milestone counts.
func (t *Tracker) counts(ctx context.Context) (map[storage.Milestone]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, t.cfg.StorageTimeout)
	defer cancel()
	return t.store.MilestoneCounts(ctx)
}

// WriteMetrics writes the fate errors, the milestone increments this
// node lost and, when tracking is on, the milestone counts (missing, not
// wrong, when storage does not answer).
func (t *Tracker) WriteMetrics(w io.Writer) {
	t.set.WritePrometheus(w)
	var lost int64
	if l, ok := t.store.(lostCounter); ok {
		lost = l.LostMilestoneCounts()
	}
	fmt.Fprintf(w, "# TYPE %s counter\n%s %d\n", mLostCounts, mLostCounts, lost)
	if !t.On() {
		return
	}
	counts, err := t.counts(context.Background())
	if err != nil {
		t.log.Warn("read milestone counts", "error", err)
		return
	}
	fmt.Fprintf(w, "# TYPE %s counter\n", mMilestones)
	for _, m := range storage.Milestones() {
		fmt.Fprintf(w, "%s{milestone=%q} %d\n", mMilestones, m.String(), counts[m])
	}
}

// Milestones is the counts as GET /__milestones__ serves them.
type Milestones struct {
	// Counts by milestone name (storage.Milestone.String).
	Counts map[string]int64 `json:"milestones"`
	// Terminal is the terminal counts' sum; Pending is received -
	// terminal: tracked messages not settled yet.
	Terminal int64 `json:"terminal"`
	Pending  int64 `json:"pending"`
}

// ServeMilestones is GET /__milestones__ on the operator's listener.
func (t *Tracker) ServeMilestones(w http.ResponseWriter, r *http.Request) {
	counts, err := t.counts(r.Context())
	if err != nil {
		t.log.Warn("read milestone counts", "error", err)
		http.Error(w, `{"error":"storage unavailable"}`, http.StatusServiceUnavailable)
		return
	}
	out := Milestones{Counts: map[string]int64{}}
	for _, m := range storage.Milestones() {
		out.Counts[m.String()] = counts[m]
		if m.State.Terminal() {
			out.Terminal += counts[m]
		}
	}
	out.Pending = counts[storage.Milestone{State: storage.FateReceived}] - out.Terminal
	b, _ := json.Marshal(out)
	w.Header().Set("Content-Type", "application/json")
	w.Write(b)
}
