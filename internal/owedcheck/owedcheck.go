// Package owedcheck keeps the storage checks owed to users whose holder
// could not be told: a message was stored for the user, and the read of
// its router record that names the node to tell (PUT /notif) failed.
// Without it the message waits for the user agent's next reconnect; a
// connected one may wait for hours. A Set tries each owed user again every
// Config.Every until the try says it is done or Config.For has passed.
//
// Entries live in memory only: a process that stops with some owed logs
// how many (their messages stay stored, found on the next connection).
package owedcheck

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
)

// Config bounds a Set. The zero value takes the defaults.
type Config struct {
	Every time.Duration // between tries of one user (default 1s)
	For   time.Duration // an owed user is given up after this (default 10m)
	Max   int           // users owed at once; more are refused (default 100,000)
}

// The ends of an owed user (Set.Ended; the end label of the counter
// Register makes).
const (
	Paid    = "paid"    // its holder was told, or no node holds it
	GaveUp  = "gave_up" // still unknown after Config.For
	Refused = "refused" // the Set was full
)

// Defaults.
const (
	DefaultEvery = time.Second
	DefaultFor   = 10 * time.Minute
	DefaultMax   = 100_000
)

// Try tells uaid's holder to check storage; done is false when it could
// not learn who holds uaid (storage unavailable), and the Set tries again.
type Try func(ctx context.Context, uaid [16]byte) (done bool)

// Set is the owed users. Safe for concurrent use.
type Set struct {
	cfg Config
	try Try

	mu   sync.Mutex
	owed map[[16]byte]owing

	counts  [3]atomic.Uint64    // by end: Paid, GaveUp, Refused
	counter [3]*metrics.Counter // the same, once Registered

	cancel context.CancelFunc // set by Start
	left   chan int
	// kick wakes run when the first user is owed: with nobody owed it
	// sleeps, rather than tick every Every on an idle node.
	kick chan struct{}
}

// owing is one owed user: since when, and how many times owed (a try
// that overlaps a later Owe does not pay it: the later message may have
// been stored after the try's check).
type owing struct {
	since time.Time
	times uint64
}

// New makes a Set that pays with try; Start does the retrying.
func New(cfg Config, try Try) *Set {
	if cfg.Every <= 0 {
		cfg.Every = DefaultEvery
	}
	if cfg.For <= 0 {
		cfg.For = DefaultFor
	}
	if cfg.Max <= 0 {
		cfg.Max = DefaultMax
	}
	return &Set{cfg: cfg, try: try, owed: map[[16]byte]owing{}, kick: make(chan struct{}, 1)}
}

// Owe records that uaid's holder is owed a check. It reports false when
// the Set is full (counted in Refused): then the message waits for the
// user agent's next connection, as without a Set.
func (s *Set) Owe(uaid [16]byte) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if o, ok := s.owed[uaid]; ok {
		o.times++
		s.owed[uaid] = o
		return true
	}
	if len(s.owed) >= s.cfg.Max {
		s.end(refused)
		return false
	}
	s.owed[uaid] = owing{since: time.Now(), times: 1}
	select {
	case s.kick <- struct{}{}:
	default:
	}
	return true
}

// Len is how many users are owed a check.
func (s *Set) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.owed)
}

// ends names the ends by their index in Set.counts.
var ends = [...]string{paid: Paid, gaveUp: GaveUp, refused: Refused}

const (
	paid = iota
	gaveUp
	refused
)

// Ended counts the owed users that ended as end (Paid, GaveUp, Refused).
func (s *Set) Ended(end string) uint64 {
	for i, e := range ends {
		if e == end {
			return s.counts[i].Load()
		}
	}
	return 0
}

func (s *Set) end(i int) {
	s.counts[i].Add(1)
	if c := s.counter[i]; c != nil {
		c.Inc()
	}
}

// Register serves the Set's figures in set: prefix_checks_owed (a gauge,
// the users owed now) and prefix_checks_owed_total{end} (a counter by
// end). Call before Start.
func (s *Set) Register(set *metrics.Set, prefix string) {
	set.NewGauge(prefix+"_checks_owed", func() float64 { return float64(s.Len()) })
	for i, e := range ends {
		s.counter[i] = set.NewCounter(prefix + `_checks_owed_total{end="` + e + `"}`)
	}
}

// Start tries the owed users every Config.Every, in a goroutine of its
// own, until Stop. Once per Set.
func (s *Set) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel, s.left = cancel, make(chan int, 1)
	go func() { s.left <- s.run(ctx) }()
}

// Stop ends what Start started (a try under way is cancelled) and returns
// how many users were still owed, which it logs to log.
func (s *Set) Stop(log *slog.Logger) int {
	left := s.Len()
	if s.cancel != nil {
		s.cancel()
		left = <-s.left
	}
	if left > 0 {
		log.Warn("stopping with storage checks owed: their messages wait for the user agents' next connections", "users", left)
	}
	return left
}

// run tries the owed users every Config.Every while any is owed, until
// ctx ends; it returns
// how many were still owed then.
func (s *Set) run(ctx context.Context) int {
	t := time.NewTimer(s.cfg.Every)
	defer t.Stop()
	for {
		if s.Len() == 0 {
			select {
			case <-ctx.Done():
				return s.Len()
			case <-s.kick:
			}
		}
		t.Reset(s.cfg.Every)
		select {
		case <-ctx.Done():
			return s.Len()
		case <-t.C:
			s.round(ctx)
		}
	}
}

// round tries each owed user once, one at a time (an outage makes every
// try fail fast; one at a time keeps a recovering store from a burst).
func (s *Set) round(ctx context.Context) {
	type entry struct {
		uaid  [16]byte
		times uint64
	}
	s.mu.Lock()
	users := make([]entry, 0, len(s.owed))
	for u, o := range s.owed {
		users = append(users, entry{u, o.times})
	}
	s.mu.Unlock()
	for _, e := range users {
		if ctx.Err() != nil {
			return
		}
		done := s.try(ctx, e.uaid)
		ended := -1
		s.mu.Lock()
		o, ok := s.owed[e.uaid]
		switch {
		case !ok:
		case done && o.times == e.times:
			delete(s.owed, e.uaid)
			ended = paid
		case done:
			// Owed again during the try: tried again next round.
		case time.Since(o.since) >= s.cfg.For:
			delete(s.owed, e.uaid)
			ended = gaveUp
		}
		s.mu.Unlock()
		if ended >= 0 {
			s.end(ended)
		}
	}
}
