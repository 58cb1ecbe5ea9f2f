package bridge

import (
	"fmt"
	"hash/maphash"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"
)

// APNs answers 400 BadDeviceToken both for a malformed token and for a
// token its other environment issued: an app configured for production
// whose builds register sandbox tokens (or the reverse) gets it for
// every device. So BadDeviceToken never drops a registration (only 410
// does); a burst of it for one app is reported instead, as a likely
// sandbox/production mix-up (docs/bridges.md, "No mass drop").

// MixupRule is when a burst of BadDeviceToken answers for one app is
// reported: Tokens distinct device tokens refused within Window (a
// sliding window). Distinct, so that an application server pushing again
// and again to one stale registration never looks like a burst.
type MixupRule struct {
	// Tokens is the number of distinct tokens; 0 reports nothing (the
	// answers are still counted).
	Tokens int
	// Window is the sliding window they must all fall in.
	Window time.Duration
}

// Metric names (docs/metrics.md).
const (
	// mBadToken{app_id}: APNs 400 BadDeviceToken answers.
	mBadToken = "autoendpoint_bridge_bad_device_token_total"
	// mMixup{app_id}: 1 while the app's BadDeviceToken answers meet its
	// MixupRule, else 0.
	mMixup = "autoendpoint_bridge_environment_mixup"
)

// mixup watches one APNs app's BadDeviceToken answers. Safe for
// concurrent use.
type mixup struct {
	app, env string
	rule     MixupRule
	now      func() time.Time
	bad      *metrics.Counter

	mu sync.Mutex
	// seen holds, for the rule.Tokens most recently refused distinct
	// tokens (by hash), when each was last refused.
	seen   map[uint64]time.Time
	logged time.Time // when the last report was logged
}

var tokenSeed = maphash.MakeSeed()

func newMixup(set *metrics.Set, app, env string, rule MixupRule, now func() time.Time) *mixup {
	m := &mixup{app: app, env: env, rule: rule, now: now, seen: map[uint64]time.Time{}}
	m.bad = set.NewCounter(fmt.Sprintf(`%s{app_id=%q}`, mBadToken, app))
	set.NewGauge(fmt.Sprintf(`%s{app_id=%q}`, mMixup, app), func() float64 {
		if m.holds(m.now()) {
			return 1
		}
		return 0
	})
	return m
}

// refused counts a BadDeviceToken answer for token, and reports whether
// it is time to log the mix-up: the rule holds, and the last report is
// at least a window old (one line per burst, then one per window while
// it lasts).
func (m *mixup) refused(token string, now time.Time) bool {
	m.bad.Inc()
	if m.rule.Tokens <= 0 {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seen[maphash.String(tokenSeed, token)] = now
	if len(m.seen) > m.rule.Tokens {
		m.forgetOldest()
	}
	if !m.holdsLocked(now) || !m.logged.IsZero() && now.Sub(m.logged) < m.rule.Window {
		return false
	}
	m.logged = now
	return true
}

// forgetOldest drops the least recently refused token: the rule only
// looks at the most recent rule.Tokens, so memory stays bounded.
func (m *mixup) forgetOldest() {
	var oldest uint64
	var at time.Time
	first := true
	for h, t := range m.seen {
		if first || t.Before(at) {
			oldest, at, first = h, t, false
		}
	}
	delete(m.seen, oldest)
}

func (m *mixup) holds(now time.Time) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.holdsLocked(now)
}

// holdsLocked: rule.Tokens distinct tokens were refused within the
// window before now.
func (m *mixup) holdsLocked(now time.Time) bool {
	if m.rule.Tokens <= 0 || len(m.seen) < m.rule.Tokens {
		return false
	}
	for _, t := range m.seen {
		if now.Sub(t) > m.rule.Window {
			return false
		}
	}
	return true
}

// hint is what the operator should check, by the app's environment.
func (m *mixup) hint() string {
	switch m.env {
	case "production":
		return "the app is configured for production; development builds (run from Xcode) register sandbox tokens, which production refuses"
	case "sandbox":
		return "the app is configured for the sandbox; release and TestFlight builds register production tokens, which the sandbox refuses"
	}
	return "the app's endpoint and the environment its builds register with differ"
}

// BadDeviceToken is told of each APNs 400 BadDeviceToken answer (the
// APNs client's OnBadDeviceToken): the push failed, the registration
// stays. It counts the answer, and logs an error naming the app when
// its answers meet the mix-up rule. Safe for concurrent use.
func (b *Bridges) BadDeviceToken(appID, token string) {
	m := b.mixups[appID]
	if m == nil {
		return // not a configured app: the send was refused before APNs
	}
	if !m.refused(token, b.now()) {
		return
	}
	b.log.Error(fmt.Sprintf("APNs refused %d distinct device tokens of app %q as BadDeviceToken within %s: likely a sandbox/production mix-up; %s. "+
		"The registrations are kept: check the app's endpoint in apns-apps", m.rule.Tokens, m.app, m.rule.Window, m.hint()),
		"app_id", m.app, "environment", m.env, "tokens", m.rule.Tokens, "window", m.rule.Window.String())
}
