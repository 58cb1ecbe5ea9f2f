package provider

import (
	"context"
	"fmt"
	"time"
)

// Provider sends notifications through one third-party push service.
// Send is called from many goroutines at once (the sender's pool) and must
// be safe for concurrent use; it must return by ctx's deadline.
type Provider interface {
	// Name is the provider's key in storage and metrics ("swrve").
	Name() string
	// Limits declares how the sender must drive it.
	Limits() Limits
	// Send makes one attempt. It never panics on anything the service
	// answers; every outcome is a Result.
	Send(ctx context.Context, n *Notification) Result
}

// Limits is what a provider declares about its service.
type Limits struct {
	// Rate is the account's limit: the most calls the service accepts in
	// any second, from every sender node sharing the store together (they
	// divide the account between them: docs/sender.md).
	Rate float64
	// Delay is the time between two calls of the account (also known
	// as delayMillis): the nodes together call at 1/Delay. It must leave
	// headroom under Rate (Pace <= Headroom × Rate) for what pacing
	// cannot make exact: a call made up to the gate's slack late, and
	// each node's one call of burst.
	Delay time.Duration
	// AverageLatency is the expected average answer time (also known as
	// averageProcessingMillis); with Delay it sizes the pool of
	// concurrent sends (PoolSize).
	AverageLatency time.Duration
	// Timeout bounds one send.
	Timeout time.Duration
	// Dedup reports that the service collapses repeats of a notification
	// with the same Notification.ID (a collapse or idempotency key), so
	// a send interrupted by a crash can be repeated safely.
	Dedup bool
	// Bridge reports a bridge (FCM, APNs): it takes only the API tier's
	// WebPush notifications to bridged users (Notification.AppID, Data),
	// never the push API's prototype messages.
	Bridge bool
}

// Headroom is the most of Rate the pace (1/Delay) may be.
const Headroom = 0.95

// Pace is the account's calls per second: 1/Delay.
func (l Limits) Pace() float64 { return float64(time.Second) / float64(l.Delay) }

// PoolSize bounds the concurrent sends: AverageLatency / Delay, the sends
// in flight when calls start every Delay and each takes the average
// latency; at least 1.
func (l Limits) PoolSize() int {
	return max(1, int(l.AverageLatency/l.Delay))
}

// Validate reports limits the sender cannot work with.
func (l Limits) Validate() error {
	switch {
	case l.Rate <= 0 || l.Rate > 1e6:
		return fmt.Errorf("rate %v is outside (0, 1e6] per second", l.Rate)
	case l.Delay < time.Microsecond:
		return fmt.Errorf("delay %s is below 1µs", l.Delay)
	case l.Pace() > Headroom*l.Rate:
		return fmt.Errorf("delay %s paces %.0f calls a second, over %.0f%% of the rate %v: leave headroom (at least %s)",
			l.Delay, l.Pace(), Headroom*100, l.Rate, time.Duration(float64(time.Second)/(Headroom*l.Rate)).Round(time.Microsecond))
	case l.AverageLatency <= 0:
		return fmt.Errorf("average latency %s is not positive", l.AverageLatency)
	case l.Timeout <= 0:
		return fmt.Errorf("timeout %s is not positive", l.Timeout)
	}
	return nil
}

// Checker is a provider that can tell, without calling its service, that
// a notification cannot be sent (Swrve: no push key for its prototype and
// platform). The sender asks before the call's turn at the rate, so such
// a notification takes no call from the account. Safe for concurrent use.
type Checker interface {
	// Check returns the result of a send that would fail, and false; or
	// true when the notification may be sent.
	Check(n *Notification) (Result, bool)
}

// Priority is the delivery priority a provider maps to its own (FCM
// "HIGH"/"NORMAL", APNs 10/5).
type Priority int

// Priorities. The zero value is Default: no urgency was given.
const (
	// Default leaves the priority to the provider's default, as
	// autopush-rs does: FCM is sent no priority (FCM's default for data
	// messages, normal); APNs gets 10, which autopush-rs always sends.
	Default Priority = iota
	Normal
	High
)

// PriorityOf maps a WebPush Urgency (RFC 8030 §5.3) to a provider
// priority: "very-low" and "low" may wait for the device's next wake-up
// (Normal); "normal" and "high" wake it (High); no urgency is Default.
func PriorityOf(urgency string) Priority {
	switch urgency {
	case "":
		return Default
	case "very-low", "low":
		return Normal
	}
	return High
}

// Notification is one push to one device.
type Notification struct {
	// ID is the push id. Providers that take a collapse or idempotency key
	// send it there, so that a repeat replaces instead of showing twice.
	ID string
	// Platform is "IOS" or "ANDROID".
	Platform string
	// PrototypeKey names the message prototype (Swrve: mapped to the
	// campaign's push_key).
	PrototypeKey string
	// AppID names the application at the provider whose credentials,
	// project or topic the bridges (FCM, APNs) send with: the
	// registration's app id.
	AppID string
	// Token is the device's key at the provider (Swrve user id, FCM
	// registration token, APNs device token).
	Token   string
	Message string
	// Priority, TTL and CollapseKey are for providers that have them.
	// TTL 0 is the provider's default for Swrve; for the bridges it is a
	// WebPush TTL of 0, "now or never" (FCM raises it to its minimum,
	// APNs sends apns-expiration 0). CollapseKey "" is none (APNs then
	// collapses on ID).
	Priority    Priority
	TTL         time.Duration
	CollapseKey string
	// Data is extra key-value payload for providers that carry it.
	Data map[string]string
}

// Verdict classifies the outcome of one send.
type Verdict int

// Verdicts. An answer's status decides them: 429, 500, 502, 503 and 504
// are Retry; any other 4xx or 5xx is Fail, but for the answers a provider
// knows to mean more (a device gone, our credentials refused, FCM's and
// APNs's other retryable 5xx). providertest holds every provider to it.
const (
	// Sent: the service accepted the notification.
	Sent Verdict = iota
	// Retry: try again later (after RetryAfter when the service named a
	// time); the push goes to RETRY until it runs out of attempts.
	Retry
	// Fail: the service refused it for good; the push is FAILED.
	Fail
	// DeviceGone: the device's token is no longer valid (FCM
	// UNREGISTERED, APNs 410; never an answer that may mean a
	// misconfiguration): the push is FAILED, and bridges drop the
	// registration.
	DeviceGone
	// NoPrototypeKey: the provider has no mapping for the push's
	// prototype and platform (recorded as error type
	// MESSAGE_PROTOTYPE_KEY).
	NoPrototypeKey
	// Broken: a runtime error on our side (recorded as error type
	// OTHER); the push is FAILED with Err as the cause.
	Broken
)

var verdictNames = [...]string{"sent", "retry", "fail", "device_gone", "no_prototype_key", "broken"}

func (v Verdict) String() string {
	if int(v) < len(verdictNames) {
		return verdictNames[v]
	}
	return fmt.Sprintf("verdict(%d)", int(v))
}

// Result is the outcome of one send.
type Result struct {
	Verdict Verdict
	// Status is the HTTP status the service answered (0: no answer).
	Status int
	// Reason is the service's own error code, when it has one.
	Reason string
	// Message is the service's error text (or what the sender should
	// record for a transport failure).
	Message string
	// RetryAfter is the wait the service asked for (Retry-After), 0 when
	// none.
	RetryAfter time.Duration
	// Err is the cause of a Broken verdict, or of a Retry that got no
	// answer (timeout, reset, refused).
	Err error
	// Auth reports that the service refused our credentials (a 401 or
	// 403, a token endpoint's refusal): the operator has to act, so the
	// sender logs it as an error and counts it apart.
	Auth bool
}
