package sender

import (
	"errors"
	"fmt"
	"time"

	"github.com/autopush-go/autopush/sender/provider"
	"github.com/autopush-go/autopush/sender/ratelimit"
)

// Config of the sender. The settings package fills it (flags -sender-*,
// variables PREFIX__SENDER_*); DefaultConfig holds the defaults.
type Config struct {
	// Workers runs the jobs and the sending pipeline in this process.
	// Without them the node only accepts pushes (immediate ones become
	// PENDING) and answers queries; sender nodes elsewhere send them.
	// Default true.
	Workers bool `conf:"sender-workers" help:"run the sender's jobs and sending workers in this process"`
	// Node names this sender node in leases and attempt rows. It must be
	// unique among the nodes sharing a store and stable across restarts:
	// a restarted node takes its own leases back at once, while another
	// node's wait until they expire. Default "" (the host name).
	Node string `conf:"sender-node" help:"this sender node's name in leases (unique, stable across restarts; default: host name)"`
	// QueueCapacity bounds each provider's queue (push.queue.capacity).
	// A client holds at most its share of it: half while it is alone
	// (docs/sender.md, "Fairness between clients"). Default 10000.
	QueueCapacity int `conf:"sender-queue-capacity" help:"pushes each provider's queue holds"`
	// RetryDelay is the wait after a retryable error before the next try
	// (push.retry.delayInSeconds); a provider's longer Retry-After wins.
	// Default 60s.
	RetryDelay time.Duration `conf:"sender-retry-delay" help:"wait before retrying after a retryable error (a longer Retry-After wins)"`
	// MaxAttempts is the most attempts a push gets (push.retry.maxAttempts);
	// after as many retryable errors it is GIVEN_UP. Default 5.
	MaxAttempts int `conf:"sender-max-attempts" help:"attempts a push gets before it is given up"`
	// TimeZone interprets cron expressions (an IANA name). Default "UTC".
	TimeZone string `conf:"sender-time-zone" help:"time zone of cron expressions (IANA name)"`
	// Lease is how long a node holds a push it queued; a push whose
	// node's lease expired (the node died) is taken over by another.
	// Renewed when the attempt starts; must exceed twice every
	// provider's timeout. Default 5m.
	Lease time.Duration `conf:"sender-lease" help:"how long a node holds a push it queued before others may take it over"`
	// Interrupted is the policy for a push whose attempt was IN_PROCESS
	// when its node died, for providers without a dedup key: "resend"
	// (the device may get it twice) or "fail" (it may get it never; the
	// push is FAILED). Providers with a dedup key always resend with the
	// same key. Default "resend".
	Interrupted string `conf:"sender-interrupted" enum:"resend|fail" help:"after a crash mid-send, for providers without dedup keys: resend or fail"`
	// Retention keeps finished pushes (SENT, FAILED, GIVEN_UP) and their
	// attempts queryable this long. Default 720h (30 days).
	Retention time.Duration `conf:"sender-retention" help:"how long finished pushes stay queryable"`
	// StoreTimeout bounds each storage call of the pipeline and jobs.
	// Default 5s.
	StoreTimeout time.Duration `conf:"sender-store-timeout" help:"timeout of one storage call of the sender"`
	// WindowGrace is how long after the last second its cron expression
	// allows a push may still be sent: a push whose call's turn comes
	// later waits for its next window. It gives a one-second expression
	// ("0 0 9 * * ?") a usable window. Default 10s.
	WindowGrace time.Duration `conf:"sender-window-grace" help:"how long after a second its cron expression allows a push may still be sent"`
	// ShareHold is how long a node's share of a provider's rate lasts
	// unless renewed (every second): a node that stops, or loses the
	// store, stops sending before then, and its share goes to the others
	// a second after. Default 10s.
	ShareHold time.Duration `conf:"sender-share-hold" help:"how long a node's share of a provider's rate lasts unless renewed (renewed every second)"`

	// The SendScheduled job (SCHEDULED pushes, due RETRY pushes, expired
	// leases): first run after ScheduledStart, then ScheduledInterval
	// after each run ends, moving at most ScheduledPortion pushes (all
	// nodes together: each moves its share of the rate's part of it).
	// Defaults 5s, 1s, 200.
	ScheduledStart    time.Duration `conf:"sender-scheduled-start-delay" help:"SendScheduled: delay of the first run"`
	ScheduledInterval time.Duration `conf:"sender-scheduled-interval" help:"SendScheduled: time from the end of a run to the next"`
	ScheduledPortion  int           `conf:"sender-scheduled-portion" help:"SendScheduled: most pushes moved per run"`
	// The SendPending job (PENDING pushes), the same way. Defaults 5s,
	// 1s, 200.
	PendingStart    time.Duration `conf:"sender-pending-start-delay" help:"SendPending: delay of the first run"`
	PendingInterval time.Duration `conf:"sender-pending-interval" help:"SendPending: time from the end of a run to the next"`
	PendingPortion  int           `conf:"sender-pending-portion" help:"SendPending: most pushes moved per run"`
}

// DefaultConfig returns the defaults documented on Config.
func DefaultConfig() Config {
	return Config{
		Workers: true, QueueCapacity: 10000, RetryDelay: time.Minute, MaxAttempts: 5, TimeZone: "UTC",
		Lease: 5 * time.Minute, Interrupted: PolicyResend, Retention: 30 * 24 * time.Hour, StoreTimeout: 5 * time.Second,
		WindowGrace: 10 * time.Second, ShareHold: 10 * time.Second,
		ScheduledStart: 5 * time.Second, ScheduledInterval: time.Second, ScheduledPortion: 200,
		PendingStart: 5 * time.Second, PendingInterval: time.Second, PendingPortion: 200,
	}
}

// Interrupted-send policies.
const (
	PolicyResend = "resend"
	PolicyFail   = "fail"
)

// Validate reports the first setting that cannot work on its own.
func (c *Config) Validate() error {
	switch {
	case c.QueueCapacity < 1:
		return errors.New("sender: config: sender-queue-capacity must be >= 1")
	case c.MaxAttempts < 1 || c.MaxAttempts > 100:
		return errors.New("sender: config: sender-max-attempts must be 1..100")
	case c.RetryDelay < time.Second:
		return errors.New("sender: config: sender-retry-delay must be >= 1s")
	case c.Lease < 10*time.Second:
		return errors.New("sender: config: sender-lease must be >= 10s")
	case c.Interrupted != PolicyResend && c.Interrupted != PolicyFail:
		return fmt.Errorf("sender: config: sender-interrupted %q is not resend or fail", c.Interrupted)
	case c.Retention < time.Second:
		return errors.New("sender: config: sender-retention must be >= 1s")
	case c.StoreTimeout <= 0:
		return errors.New("sender: config: sender-store-timeout must be positive")
	case c.WindowGrace < time.Second:
		return errors.New("sender: config: sender-window-grace must be >= 1s")
	case c.ShareHold < ratelimit.MinShareHold:
		return fmt.Errorf("sender: config: sender-share-hold must be >= %s (two margins, the plan horizon and a renewal)",
			ratelimit.MinShareHold)
	case c.ScheduledStart < 0 || c.PendingStart < 0 || c.ScheduledInterval <= 0 || c.PendingInterval <= 0:
		return errors.New("sender: config: job start delays must be >= 0 and intervals > 0")
	case c.ScheduledPortion < 1 || c.PendingPortion < 1:
		return errors.New("sender: config: job portions must be >= 1")
	}
	if _, err := loadLocation(c.TimeZone); err != nil {
		return fmt.Errorf("sender: config: sender-time-zone: %w", err)
	}
	return nil
}

// ValidateFor checks the sizing rules against one provider's limits:
// each job's portion is smaller than the queue, and a portion is sent
// within the job's interval at the provider's pace (its Delay).
func (c *Config) ValidateFor(name string, l provider.Limits) error {
	if err := l.Validate(); err != nil {
		return fmt.Errorf("sender: provider %s: %w", name, err)
	}
	delay := l.Delay
	for _, j := range []struct {
		job      string
		portion  int
		interval time.Duration
	}{{"sender-scheduled", c.ScheduledPortion, c.ScheduledInterval}, {"sender-pending", c.PendingPortion, c.PendingInterval}} {
		if j.portion >= c.QueueCapacity {
			return fmt.Errorf("sender: config: %s-portion (%d) must be smaller than sender-queue-capacity (%d)",
				j.job, j.portion, c.QueueCapacity)
		}
		if time.Duration(j.portion)*delay >= j.interval {
			return fmt.Errorf("sender: config: %s-portion × %s's minimum delay (%d × %s = %s) must be less than %s-interval (%s)",
				j.job, name, j.portion, delay, time.Duration(j.portion)*delay, j.job, j.interval)
		}
	}
	if c.Lease <= 2*l.Timeout {
		return fmt.Errorf("sender: config: sender-lease (%s) must exceed twice %s's timeout (%s)", c.Lease, name, l.Timeout)
	}
	return nil
}
