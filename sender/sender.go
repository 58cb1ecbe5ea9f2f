package sender

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/autopush-go/autopush/sender/cron"
	"github.com/autopush-go/autopush/sender/provider"
	"github.com/autopush-go/autopush/storage"
)

// Sender accepts, stores and sends outbound pushes. Safe for concurrent
// use; Start and Stop are called once each.
type Sender struct {
	cfg   Config
	store storage.PushStore
	log   *slog.Logger
	loc   *time.Location
	node  string
	life  lifecycle // the life cycle's rules (lifecycle.go)
	lanes map[string]*lane
	first string // the provider of requests that name none
	m     *senderMetrics
	gone  func(ctx context.Context, p storage.Push) // OnDeviceGone
	final func(ctx context.Context, p storage.Push) // OnFinal

	ctx     context.Context // cancelled by Stop: jobs and readers end
	cancel  context.CancelFunc
	jobs    sync.WaitGroup // job loops and readers
	sends   sync.WaitGroup // provider calls in flight
	started bool
	ready   chan struct{} // closed when recovery ended and the queues opened
	// lastTakeover is when SendScheduled last read expired leases (only
	// its goroutine touches it).
	lastTakeover time.Time
	takingOver   bool          // its last read found expired leases (same goroutine)
	discards     chan struct{} // a slot per discard running (discardLater)
}

// New checks cfg against every provider's limits (Config.ValidateFor) and
// prepares a sender; Start runs its workers. The first provider is the
// one requests without a provider go to.
func New(cfg Config, store storage.PushStore, providers []provider.Provider, log *slog.Logger) (*Sender, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if len(providers) == 0 {
		return nil, errors.New("sender: no provider")
	}
	if log == nil {
		log = slog.Default()
	}
	loc, _ := loadLocation(cfg.TimeZone)
	node := cfg.Node
	if node == "" {
		h, err := os.Hostname()
		if err != nil || h == "" {
			return nil, fmt.Errorf("sender: sender-node is empty and the host name is unknown: %v", err)
		}
		node = h
	}
	if len(node) > storage.MaxPushField {
		return nil, fmt.Errorf("sender: config: sender-node is over %d bytes", storage.MaxPushField)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Sender{cfg: cfg, store: store, log: log.With("component", "sender"), loc: loc, node: node,
		life: newLifecycle(cfg, node, loc), lanes: map[string]*lane{}, first: providers[0].Name(), m: newMetrics(), ctx: ctx, cancel: cancel,
		ready: make(chan struct{}), discards: make(chan struct{}, discardConcurrency)}
	for _, p := range providers {
		if err := cfg.ValidateFor(p.Name(), p.Limits()); err != nil {
			cancel()
			return nil, err
		}
		if _, dup := s.lanes[p.Name()]; dup {
			cancel()
			return nil, fmt.Errorf("sender: provider %s given twice", p.Name())
		}
		s.lanes[p.Name()] = newLane(s, p)
	}
	return s, nil
}

// Node is this sender node's name in leases.
func (s *Sender) Node() string { return s.node }

// Start begins sending when Workers is set: it starts each provider's
// reader, takes this node's share of each provider's rate, takes back its
// own leases (pushes it had queued before a restart), then opens the
// queues to Accept and starts the two jobs.
// Without Workers it does nothing.
func (s *Sender) Start() error {
	if !s.cfg.Workers || s.started {
		return nil
	}
	s.started = true
	for _, l := range s.lanes {
		s.jobs.Add(1)
		go l.read()
	}
	s.jobs.Add(1)
	go func() {
		defer s.jobs.Done()
		// Each provider's share of its rate first, so that the pushes
		// recovered and accepted next have a pace to be sent at (a node
		// that gets none, or cannot reach the store, goes on without:
		// its share loop keeps asking).
		var shared sync.WaitGroup
		for _, l := range s.lanes {
			shared.Add(1)
			s.jobs.Add(1)
			go func() {
				defer s.jobs.Done()
				l.share.Run(s.ctx, shared.Done)
			}()
		}
		shared.Wait()
		// Recovery next, alone: until it ends nothing of this run is
		// IN_MEMORY under this node's name (Accept stores immediate
		// pushes PENDING, the jobs have not started), so every push it
		// finds is an earlier run's. Were this run's pushes queued or
		// being sent meanwhile, it would take them for leftovers and
		// queue them a second time.
		s.recover(s.ctx)
		if s.ctx.Err() != nil {
			return
		}
		for _, l := range s.lanes {
			l.running.Store(true)
		}
		close(s.ready)
		s.jobs.Add(1)
		go func() {
			defer s.jobs.Done()
			s.loop(jobPending, s.cfg.PendingStart, s.cfg.PendingInterval, s.sendPending)
		}()
		s.loop(jobScheduled, s.cfg.ScheduledStart, s.cfg.ScheduledInterval, s.sendScheduled)
	}()
	s.log.Info("sender started", "node", s.node, "providers", len(s.lanes), "queue_capacity", s.cfg.QueueCapacity)
	return nil
}

// Ready is closed once Start's recovery has ended and the queues take
// pushes: from then on Accept queues an immediate push (IN_MEMORY) when its
// queue has room. Never closed without Workers, or when Stop came first.
func (s *Sender) Ready() <-chan struct{} { return s.ready }

// Stop ends the sender within ctx, all at once:
//   - the queues close (Accept stores immediate pushes PENDING) and the
//     gates plan no call again (those planned are made, within
//     ratelimit.PlanHorizon);
//   - this node's rate shares are given up, so the other nodes pace at
//     the whole account's rate a settle later (NodeShare.Release);
//   - the pushes still queued are handed back as PENDING, in batches, for
//     any node to send now;
//   - the sends in flight finish and record their outcome.
//
// A push not handed back by ctx's end keeps this node's lease: a restart
// takes it back, another node takes it over when the lease expires. The
// log line and autosender_stop_pushes_total say how many were handed
// back and left. The error is ctx's when sends were still in flight.
func (s *Sender) Stop(ctx context.Context) error {
	s.cancel()
	if !s.started {
		return nil
	}
	start := time.Now()
	for _, l := range s.lanes {
		l.running.Store(false)
		l.gate.Close()
	}
	jobsDone := make(chan struct{})
	go func() { s.jobs.Wait(); close(jobsDone) }()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var total stopCount
	for _, l := range s.lanes {
		wg.Add(2)
		go func() { defer wg.Done(); l.share.Release(ctx) }()
		go func() {
			defer wg.Done()
			c := l.handBackQueue(ctx, jobsDone)
			mu.Lock()
			total.handed, total.changed, total.left = total.handed+c.handed, total.changed+c.changed, total.left+c.left
			mu.Unlock()
		}()
	}
	// The readers (jobs) add to sends: those are waited for once they end.
	err := waitDone(ctx, jobsDone)
	if err == nil {
		err = waitCtx(ctx, &s.sends)
	}
	wg.Wait()
	attrs := []any{"node", s.node, "handed_back", total.handed, "changed", total.changed, "left", total.left,
		"took", time.Since(start).Round(time.Millisecond)}
	if err != nil || total.left > 0 {
		s.log.Warn("sender stopped before its sends or hand-back finished; what is left keeps this node's lease until it expires or the node restarts",
			append(attrs, "sends_unfinished", err != nil)...)
		return err
	}
	s.log.Info("sender stopped", attrs...)
	return nil
}

// waitCtx waits for wg or ctx, whichever is first.
func waitCtx(ctx context.Context, wg *sync.WaitGroup) error {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	return waitDone(ctx, done)
}

// waitDone waits for done to close or ctx to end, whichever is first.
func waitDone(ctx context.Context, done <-chan struct{}) error {
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("sender: stop: %w", ctx.Err())
	}
}

// Request is a push to accept: the POST /push body (docs/openapi.yaml).
type Request struct {
	Platform       string
	PrototypeKey   string
	PushKey        string
	Message        string
	CronExpression string // "" for an immediate push
	// Provider names the provider; "" is the first one configured.
	Provider string
	// ID names the push; uuid.Nil: a new (v7) one. The API tier names a
	// bridged notification after its message id, so that a DELETE of
	// that id finds the push to withdraw. An id must be new.
	ID uuid.UUID
	// Bridge makes this a WebPush notification to a bridged user (the
	// API tier's): Provider names the bridge, PushKey is the device's
	// token, Platform the device's; PrototypeKey, Message and
	// CronExpression stay empty. Bridges take nothing else, and the other
	// providers never take one.
	Bridge *storage.PushBridge
	// Client names the push API's client that sends it ("" for the
	// WebPush tier's bridged notifications).
	Client string
}

// FieldError is a request field out of the rules; nothing was stored.
type FieldError struct {
	Field  string // the JSON name
	Reason string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Reason }

// MaxMessageBytes is the longest message per platform: what fits an APNs
// alert (a 4 KiB payload with its JSON around it) and an FCM notification
// (4 KiB of data) once the provider has added its own fields.
var MaxMessageBytes = map[string]int{"IOS": 2048, "ANDROID": 3072}

// validate checks r; a *FieldError names the first field out of rules.
func (s *Sender) validate(r *Request, now time.Time) (time.Time, error) {
	if r.Provider == "" {
		r.Provider = s.first
	}
	l := s.lanes[r.Provider]
	switch {
	case l == nil:
		return time.Time{}, &FieldError{"provider", fmt.Sprintf("%q is not configured", r.Provider)}
	case l.limits.Bridge != (r.Bridge != nil):
		return time.Time{}, &FieldError{"provider", fmt.Sprintf("%q is a bridge: it takes only WebPush notifications to bridged users", r.Provider)}
	case r.Bridge != nil:
		return time.Time{}, validateBridge(r)
	}
	limit, ok := MaxMessageBytes[r.Platform]
	switch {
	case !ok:
		return time.Time{}, &FieldError{"platform", "must be IOS or ANDROID"}
	case strings.TrimSpace(r.PrototypeKey) == "":
		return time.Time{}, &FieldError{"messagePrototypeKey", "must not be empty"}
	case len(r.PrototypeKey) > storage.MaxPushField:
		return time.Time{}, &FieldError{"messagePrototypeKey", fmt.Sprintf("must be at most %d bytes", storage.MaxPushField)}
	case strings.TrimSpace(r.PushKey) == "":
		return time.Time{}, &FieldError{"pushKey", "must not be empty"}
	case len(r.PushKey) > storage.MaxPushField:
		return time.Time{}, &FieldError{"pushKey", fmt.Sprintf("must be at most %d bytes", storage.MaxPushField)}
	case strings.TrimSpace(r.Message) == "":
		return time.Time{}, &FieldError{"message", "must not be empty"}
	case !utf8.ValidString(r.Message):
		return time.Time{}, &FieldError{"message", "must be UTF-8"}
	case len(r.Message) > limit:
		return time.Time{}, &FieldError{"message", fmt.Sprintf("is %d bytes, over the %d bytes of a %s push", len(r.Message), limit, r.Platform)}
	case len(r.CronExpression) > storage.MaxPushField:
		return time.Time{}, &FieldError{"cronExpression", fmt.Sprintf("must be at most %d bytes", storage.MaxPushField)}
	case len(r.Client) > storage.MaxPushField:
		return time.Time{}, &FieldError{"client", fmt.Sprintf("must be at most %d bytes", storage.MaxPushField)}
	}
	var next time.Time
	if r.CronExpression != "" {
		sched, err := cron.Parse(r.CronExpression)
		if err != nil {
			return time.Time{}, &FieldError{"cronExpression", "is not a Quartz cron expression: " + err.Error()}
		}
		if next, err = sched.Next(now, s.loc); err != nil {
			return time.Time{}, &FieldError{"cronExpression", fmt.Sprintf("allows no time in the next %d years: %s", cron.Horizon, sched.Why(now))}
		}
	}
	// A prototype the provider cannot send (Swrve: no push key for it on
	// the platform) is refused now, not FAILED later; send asks again, for
	// a mapping removed meanwhile.
	if c, ok := l.p.(provider.Checker); ok {
		n := provider.Notification{Platform: r.Platform, PrototypeKey: r.PrototypeKey, Token: r.PushKey, Message: r.Message}
		if res, ok := c.Check(&n); !ok {
			return time.Time{}, &FieldError{"messagePrototypeKey", res.Message}
		}
	}
	return next, nil
}

// validateBridge checks a bridged notification: the API tier built it,
// so a fault here is a bug there, reported as a field error all the same.
func validateBridge(r *Request) error {
	b := r.Bridge
	switch {
	case r.Message != "" || r.PrototypeKey != "" || r.CronExpression != "":
		return &FieldError{"bridge", "a bridged notification has no message, prototype or cron expression"}
	case r.Platform != "IOS" && r.Platform != "ANDROID":
		return &FieldError{"platform", "must be IOS or ANDROID"}
	case r.PushKey == "" || len(r.PushKey) > storage.MaxPushField:
		return &FieldError{"pushKey", fmt.Sprintf("the device token must be 1 to %d bytes", storage.MaxPushField)}
	case b.AppID == "" || len(b.AppID) > storage.MaxPushField:
		return &FieldError{"bridge", fmt.Sprintf("the app id must be 1 to %d bytes", storage.MaxPushField)}
	case b.TTL < 0:
		return &FieldError{"bridge", "negative TTL"}
	}
	return nil
}

// Accept validates r, stores the push durably and queues it when it is
// immediate and its queue has room within r.Client's share (IN_MEMORY),
// else leaves it PENDING (or SCHEDULED for its cron window). The push is
// stored before Accept returns; on a storage error nothing is queued and
// the error wraps storage.ErrUnavailable (or another storage kind). A
// *FieldError means r broke a rule (a prototype its provider cannot send
// among them) and nothing was stored.
func (s *Sender) Accept(ctx context.Context, r Request) (storage.Push, error) {
	start := time.Now()
	due, err := s.validate(&r, start)
	if err != nil {
		return storage.Push{}, err
	}
	id := r.ID
	if id == uuid.Nil {
		if id, err = uuid.NewV7(); err != nil {
			return storage.Push{}, fmt.Errorf("sender: push id: %w", err)
		}
	}
	l := s.lanes[r.Provider]
	queued := r.CronExpression == "" && l.reserve(r.Client) == slotTaken
	p := s.life.accepted(&r, id, due, queued, start)
	sctx, cancel := context.WithTimeout(ctx, s.cfg.StoreTimeout)
	defer cancel()
	if err := s.store.SavePush(sctx, p); err != nil {
		if queued {
			l.release(r.Client)
		}
		s.m.storageError(stageReceive)
		s.discardLater(p)
		return storage.Push{}, fmt.Errorf("sender: accept: %w", err)
	}
	if queued {
		l.put(p)
	}
	s.m.receive(start, r.CronExpression != "", p.State == storage.PushPending)
	return p, nil
}

// discardLater makes sure p, whose create failed, is never sent: the
// caller is told it was not accepted (the push API answers 503, and the
// client sends it again), but a write that timed out may have stored it
// all the same, and a stored push is sent (TestClusterSenderFaults saw
// refused pushes sent before this). It runs discard in the background,
// so that the refusal is not delayed, discardConcurrency at most at once
// (a storage outage refuses every push); beyond, p is only logged.
func (s *Sender) discardLater(p storage.Push) {
	select {
	case s.discards <- struct{}{}:
	default:
		s.log.Warn("a push refused on a storage error may have been stored, and may be sent (too many refusals at once to check it)", "push", p.ID)
		return
	}
	go func() {
		defer func() { <-s.discards }()
		s.discard(&p)
	}()
}

// discardConcurrency bounds the discards running at once: a Cassandra
// node's loss refused 38 pushes at once on one node in
// TestClusterSenderFaults (16 left 22 unchecked); each waits at most
// sender-store-timeout.
const discardConcurrency = 256

// discard makes p FAILED by a conditional update from the version
// created, which finds nothing when nothing was stored. A failed try is
// retried within the storage timeout (the failure that refused the
// push, a replica lost, often fails the next write too). A push created
// PENDING that a node claimed first is sent, and logged; so is one whose
// update keeps failing.
func (s *Sender) discard(p *storage.Push) {
	st := s.life.discarded(p, time.Now())
	if !st.ok {
		return
	}
	next := st.next
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.StoreTimeout)
	defer cancel()
	delay := 100 * time.Millisecond
	for try := 1; ; try++ {
		err := s.store.UpdatePush(ctx, p, next)
		switch {
		case err == nil:
			s.log.Warn("a push refused on a storage error was stored all the same; it is FAILED, not sent", "push", p.ID)
			return
		case errors.Is(err, storage.ErrNotFound): // nothing stored
			return
		case errors.Is(err, storage.ErrConflict) && try > 1:
			// Made FAILED by the try that failed, or claimed.
			if got, gerr := s.store.GetPush(ctx, p.ID); gerr == nil && got.Version == next.Version && got.State == storage.PushFailed {
				return
			}
		}
		if !errors.Is(err, storage.ErrUnavailable) || ctx.Err() != nil {
			s.log.Warn("a push refused on a storage error may have been stored, and may be sent", "push", p.ID, "error", err)
			return
		}
		select {
		case <-time.After(delay): // backing off a storage outage
		case <-ctx.Done():
		}
		delay = min(2*delay, time.Second)
	}
}

// Get returns a push with its attempt log (storage.ErrNotFound when there
// is none, or it was finished longer ago than the retention).
func (s *Sender) Get(ctx context.Context, id uuid.UUID) (storage.Push, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.StoreTimeout)
	defer cancel()
	return s.store.GetPush(ctx, id)
}

// List pages through the pushes in state (storage.PushStore.ListPushes).
func (s *Sender) List(ctx context.Context, state storage.PushState, cursor string, limit int) ([]storage.Push, string, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.StoreTimeout)
	defer cancel()
	return s.store.ListPushes(ctx, state, cursor, limit)
}

// Withdraw finishes a push that has not reached its provider: FAILED,
// with cause in an attempt that made no call, so GET /push/{id} says
// why; the jobs and queues skip it from then on (a queued copy finds it
// changed and is not sent). It reports false, and changes nothing, when
// there is nothing to withdraw: no such push, a final one, or one whose
// provider call is in flight (its attempt IN_PROCESS: the provider may
// have it already).
func (s *Sender) Withdraw(ctx context.Context, id uuid.UUID, cause string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.StoreTimeout)
	defer cancel()
	// A push changing under us (claimed, queued, attempted) is read
	// again; each change moves it on, so a few reads settle it.
	for range 4 {
		p, err := s.store.GetPush(ctx, id)
		if errors.Is(err, storage.ErrNotFound) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("sender: withdraw: %w", err)
		}
		st := s.life.withdrawn(&p, cause, time.Now())
		if !st.ok {
			return false, nil
		}
		err = s.store.UpdatePush(ctx, &p, st.next)
		switch {
		case err == nil:
			if l := s.lanes[p.Provider]; l != nil {
				l.m.count(st.count)
			}
			s.finished(&st.next)
			return true, nil
		case !errors.Is(err, storage.ErrConflict):
			return false, fmt.Errorf("sender: withdraw: %w", err)
		}
	}
	return false, nil
}

// update writes next over prev with the sender's storage timeout.
func (s *Sender) update(prev *storage.Push, next storage.Push) error {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.StoreTimeout)
	err := s.store.UpdatePush(ctx, prev, next)
	cancel()
	if err == nil {
		s.finished(&next)
	}
	return err
}
