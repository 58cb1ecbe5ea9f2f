package sender

import (
	"io"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/autopush-go/autopush/sender/provider"
	"github.com/autopush-go/autopush/sender/ratelimit"
	"github.com/autopush-go/autopush/storage"
)

// Metric names of the sender, one place (docs/metrics.md and the dashboard
// are checked against them). Each names the original Java sender's metric
// it carries; labelled families are listed by their name.
const (
	// mReceived{kind="immediate"|"scheduled"}: pushes accepted
	// (immediatePushReceived, scheduledPushReceived).
	mReceived = "autosender_pushes_received_total"
	// mWentPending: immediate pushes that found the queue full and were
	// stored PENDING (immediatePushWentPending).
	mWentPending = "autosender_pushes_went_pending_total"
	// mReceiveSeconds: time to accept a push, storage write included
	// (receivingTime).
	mReceiveSeconds = "autosender_receive_seconds"
	// mSent{provider}: pushes the provider accepted (sendingSuccess).
	mSent = "autosender_sent_total"
	// mSendSeconds{provider}: provider answer time (sendingTime).
	mSendSeconds = "autosender_send_seconds"
	// mFailed{provider,error_type}: pushes FAILED, by error type PROVIDER,
	// MESSAGE_PROTOTYPE_KEY, OTHER (their sum is sendingFail; each is
	// providerSendingError, also known as swrveSendingError,
	// messagePrototypeKeySendingError, otherSendingError).
	mFailed = "autosender_failed_total"
	// mAttemptsFailed{provider}: attempts that failed with an error that
	// allows a retry (sendingAttemptFailed).
	mAttemptsFailed = "autosender_attempts_failed_total"
	// mGivenUp{provider}: pushes that used every attempt (sendingGivenUp).
	mGivenUp = "autosender_given_up_total"
	// mStorageErrors{stage}: storage failures while receiving a push
	// (notStoredExceptionWhileReceiving), recording an attempt
	// (notStoredExceptionWhileAttempt) and reading or claiming for the
	// queue (notStoredExceptionReadingQueue).
	mStorageErrors = "autosender_storage_errors_total"
	// mQueueSize{provider}: pushes in the queue (queueSize).
	mQueueSize = "autosender_queue_size"
	// mPoolBusy{provider}: sends in flight in the pool
	// (sendingThreadPoolSize); mPoolSize{provider}: its bound.
	mPoolBusy = "autosender_pool_busy"
	mPoolSize = "autosender_pool_size"
	// mCallerRuns{provider}: sends the reader made itself because the
	// pool was full.
	mCallerRuns = "autosender_caller_runs_total"
	// mInterrupted{provider}: pushes found with an attempt IN_PROCESS
	// after their node stopped (each such attempt is also counted in
	// mAttempts with verdict="interrupted").
	mInterrupted = "autosender_interrupted_total"
	// mWindowMissed{provider}: pushes whose cron window had closed when
	// their call's turn came: they wait for the next window, or FAIL
	// when the expression allows none.
	mWindowMissed = "autosender_window_missed_total"
	// mReplanned{provider}: calls planned again because the planned time
	// passed before the call could be made (a slow attempt write, a
	// moment without CPU).
	mReplanned = "autosender_replanned_total"
	// mShareParts{provider}: parts of the provider's pace (of 120) this
	// node may use now; mSharePace{provider}: the calls a second they
	// are.
	mShareParts = "autosender_share_parts"
	mSharePace  = "autosender_share_pace"
	// mClaims{job,result="claimed"|"lost"}: pushes the jobs claimed, and
	// claims another node won.
	mClaims = "autosender_claims_total"
	// mLeaseLost{provider}: queued pushes dropped because another node
	// took them over, or they were withdrawn, before the attempt started;
	// and sends held up until their lease no longer covered the call,
	// handed back unsent.
	mLeaseLost = "autosender_lease_lost_total"
	// mAttempts{provider,verdict}: provider calls by verdict (sent,
	// retry, fail, device_gone, no_prototype_key, broken), and attempts
	// whose answer a stopped node never recorded (interrupted).
	mAttempts = "autosender_attempts_total"
	// mAuthFailures{provider}: calls the provider refused for our
	// credentials (each also logged as an error).
	mAuthFailures = "autosender_auth_failures_total"
	// mExpired{provider}: bridged notifications FAILED unsent because
	// their TTL passed while they waited.
	mExpired = "autosender_expired_total"
	// mWithdrawn{provider}: pushes FAILED unsent because they were
	// withdrawn (a bridged push's DELETE /m/{id}, or a client's cancel,
	// DELETE /push/{id}).
	mWithdrawn = "autosender_withdrawn_total"
	// mStopPushes{provider,result}: what a stop did with the pushes
	// queued: handed_back (PENDING, for any node to send now), changed
	// (withdrawn or taken over meanwhile: not this node's any more) and
	// left (still under this node's lease when the stop's time ran out:
	// a restart takes them back, another node when the lease expires).
	mStopPushes = "autosender_stop_pushes_total"
	// mKeysReloads{result="ok"|"error"}: reloads of a provider's mapping.
	mKeysReloads = "autosender_keys_reloads_total"
)

// Storage stages of mStorageErrors.
const (
	stageReceive = "receive"
	stageAttempt = "attempt"
	stageQueue   = "queue"
	// stageShare: reading or renewing a share of a provider's rate.
	stageShare = "share"
)

// Job names (mClaims, logs).
const (
	jobScheduled = "send_scheduled"
	jobPending   = "send_pending"
	jobRecover   = "recover"
)

// secondsBuckets: receive times (sub-ms on local disk) up to provider
// answers (Swrve's measured answers took up to 7.7 s) and timeouts.
var secondsBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2, 3, 4, 5, 6, 8, 10, 15, 30}

type senderMetrics struct {
	set            *metrics.Set
	received       map[bool]*metrics.Counter // by scheduled
	wentPending    *metrics.Counter
	receiveSeconds *metrics.PrometheusHistogram
	storageErrors  map[string]*metrics.Counter
	claims         map[[2]string]*metrics.Counter
	reloadOK       *metrics.Counter
	reloadError    *metrics.Counter
}

func newMetrics() *senderMetrics {
	s := metrics.NewSet()
	m := &senderMetrics{
		set: s,
		received: map[bool]*metrics.Counter{
			false: s.NewCounter(mReceived + `{kind="immediate"}`),
			true:  s.NewCounter(mReceived + `{kind="scheduled"}`),
		},
		wentPending:    s.NewCounter(mWentPending),
		receiveSeconds: s.NewPrometheusHistogramExt(mReceiveSeconds, secondsBuckets),
		storageErrors:  map[string]*metrics.Counter{},
		claims:         map[[2]string]*metrics.Counter{},
		reloadOK:       s.NewCounter(mKeysReloads + `{result="ok"}`),
		reloadError:    s.NewCounter(mKeysReloads + `{result="error"}`),
	}
	for _, st := range []string{stageReceive, stageAttempt, stageQueue, stageShare} {
		m.storageErrors[st] = s.NewCounter(mStorageErrors + `{stage="` + st + `"}`)
	}
	for _, job := range []string{jobScheduled, jobPending, jobRecover} {
		for _, r := range []string{"claimed", "lost"} {
			m.claims[[2]string{job, r}] = s.NewCounter(mClaims + `{job="` + job + `",result="` + r + `"}`)
		}
	}
	return m
}

// laneMetrics are one provider's.
type laneMetrics struct {
	sent, attemptsFailed, givenUp, callerRuns, interrupted, leaseLost *metrics.Counter
	authFailures, expired, withdrawn, windowMissed, replanned         *metrics.Counter
	stopHanded, stopChanged, stopLeft                                 *metrics.Counter
	interruptedAttempts                                               *metrics.Counter
	verdicts                                                          []*metrics.Counter // by provider.Verdict
	failed                                                            map[storage.ErrorType]*metrics.Counter
	sendSeconds                                                       *metrics.PrometheusHistogram
}

func (m *senderMetrics) lane(name string, queue func() int, busy *atomic.Int64, poolSize int, g *ratelimit.CallGate) *laneMetrics {
	s, l := m.set, `{provider="`+name+`"}`
	lm := &laneMetrics{
		sent: s.NewCounter(mSent + l), attemptsFailed: s.NewCounter(mAttemptsFailed + l),
		givenUp: s.NewCounter(mGivenUp + l), callerRuns: s.NewCounter(mCallerRuns + l),
		interrupted: s.NewCounter(mInterrupted + l), leaseLost: s.NewCounter(mLeaseLost + l),
		authFailures: s.NewCounter(mAuthFailures + l), expired: s.NewCounter(mExpired + l),
		withdrawn: s.NewCounter(mWithdrawn + l), windowMissed: s.NewCounter(mWindowMissed + l),
		replanned:           s.NewCounter(mReplanned + l),
		stopHanded:          s.NewCounter(mStopPushes + `{provider="` + name + `",result="handed_back"}`),
		stopChanged:         s.NewCounter(mStopPushes + `{provider="` + name + `",result="changed"}`),
		stopLeft:            s.NewCounter(mStopPushes + `{provider="` + name + `",result="left"}`),
		interruptedAttempts: s.NewCounter(mAttempts + `{provider="` + name + `",verdict="interrupted"}`),
		failed:              map[storage.ErrorType]*metrics.Counter{},
		sendSeconds:         s.NewPrometheusHistogramExt(mSendSeconds+l, secondsBuckets),
	}
	for _, t := range []storage.ErrorType{storage.ErrorProvider, storage.ErrorPrototypeKey, storage.ErrorOther} {
		lm.failed[t] = s.NewCounter(mFailed + `{provider="` + name + `",error_type="` + string(t) + `"}`)
	}
	for v := provider.Sent; v <= provider.Broken; v++ {
		lm.verdicts = append(lm.verdicts, s.NewCounter(mAttempts+`{provider="`+name+`",verdict="`+v.String()+`"}`))
	}
	s.NewGauge(mQueueSize+l, func() float64 { return float64(queue()) })
	s.NewGauge(mPoolBusy+l, func() float64 { return float64(busy.Load()) })
	s.NewGauge(mPoolSize+l, func() float64 { return float64(poolSize) })
	s.NewGauge(mShareParts+l, func() float64 { return float64(g.Parts()) })
	s.NewGauge(mSharePace+l, g.Pace)
	return lm
}

// count adds what a step of the life cycle did (lifecycle.go).
func (lm *laneMetrics) count(t tally) {
	if t.called {
		lm.verdict(t.verdict)
	}
	for _, c := range []struct {
		did bool
		n   *metrics.Counter
	}{
		{t.auth, lm.authFailures}, {t.sent, lm.sent}, {t.retryable, lm.attemptsFailed}, {t.givenUp, lm.givenUp},
		{t.interrupted, lm.interrupted}, {t.interrupted, lm.interruptedAttempts}, {t.expired, lm.expired},
		{t.withdrawn, lm.withdrawn}, {t.missed, lm.windowMissed},
	} {
		if c.did {
			c.n.Inc()
		}
	}
	if t.failed != "" {
		lm.failed[t.failed].Inc()
	}
}

func (lm *laneMetrics) verdict(v provider.Verdict) {
	if int(v) >= 0 && int(v) < len(lm.verdicts) {
		lm.verdicts[v].Inc()
	}
}

func (m *senderMetrics) storageError(stage string) { m.storageErrors[stage].Inc() }

func (m *senderMetrics) claim(job string, won bool) {
	r := "lost"
	if won {
		r = "claimed"
	}
	m.claims[[2]string{job, r}].Inc()
}

func (m *senderMetrics) receive(start time.Time, scheduled, pending bool) {
	m.receiveSeconds.UpdateDuration(start)
	m.received[scheduled].Inc()
	if pending {
		m.wentPending.Inc()
	}
}

// WriteMetrics writes the sender's metrics in the Prometheus text format.
func (s *Sender) WriteMetrics(w io.Writer) { s.m.set.WritePrometheus(w) }

// KeysReloaded counts a reload of a provider's mapping (nil: it worked).
func (s *Sender) KeysReloaded(err error) {
	if err != nil {
		s.m.reloadError.Inc()
		return
	}
	s.m.reloadOK.Inc()
}
