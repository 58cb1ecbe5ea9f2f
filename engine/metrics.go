package engine

import (
	"github.com/VictoriaMetrics/metrics"

	"github.com/autopush-go/autopush/engine/session"
)

// Metric names of the connection node, one place (docs/metrics.md and the
// dashboard in ops/ are checked against them).
const (
	mConnections       = "autoconnect_connections"
	mClients           = "autoconnect_clients"
	mUpgrades          = `autoconnect_upgrades_total{result="ok"}`
	mUpgradesRefused   = `autoconnect_upgrades_total{result="refused"}`
	mUpgradesBad       = `autoconnect_upgrades_total{result="bad_request"}`
	mHellos            = "autoconnect_hellos_total"
	mHelloNewUAID      = "autoconnect_hello_new_uaid_total"
	mRegisters         = "autoconnect_registers_total"
	mUnregisters       = "autoconnect_unregisters_total"
	mNotifSent         = `autoconnect_notifications_sent_total{source="direct"}`
	mNotifSentStored   = `autoconnect_notifications_sent_total{source="stored"}`
	mNotifAcked        = "autoconnect_notifications_acked_total"
	mNotifNacked       = "autoconnect_notifications_nacked_total"
	mNotifExpired      = "autoconnect_notifications_expired_total"
	mNotifStoredOnExit = "autoconnect_notifications_stored_on_close_total"
	mInFlight          = "autoconnect_notifications_in_flight"
	mDirectBusy        = `autoconnect_direct_total{result="busy"}`
	mDirectMiss        = `autoconnect_direct_total{result="not_here"}`
	mDirectOK          = `autoconnect_direct_total{result="delivered"}`
	mDirectStale       = `autoconnect_direct_total{result="stale"}`
	mEvictions         = "autoconnect_evictions_total"
	mPingsSent         = "autoconnect_pings_sent_total"
	mAPIUnauthorized   = "autoconnect_node_api_unauthorized_total"
	mAPIConnections    = "autoconnect_node_api_connections"
	mAPIRefused        = "autoconnect_node_api_connections_refused_total"
	mRefusedSource     = "autoconnect_connections_refused_per_source_total"
	mRefusedFull       = "autoconnect_connections_refused_total"
	mAPIAcceptErrors   = "autoconnect_node_api_accept_errors_total"
	mStorageSeconds    = "autoconnect_storage_seconds"
	mDeliveryAck       = "autoconnect_delivery_ack_seconds"
	mDraining          = "autoconnect_draining"
	mStorageDown       = "autoconnect_storage_down"
	mOwedWrites        = "autoconnect_owed_writes"
	mStorageErrors     = "autoconnect_storage_errors_total"
	mOverloaded        = "autoconnect_overloaded_total"
	mErrors            = "autoconnect_errors_total" // {kind}: session.ErrorKinds
	mPendingWork       = "autoconnect_pending_work"
	// mFateErrors: a tracked message's fate (transmitted, delivered,
	// dropped) that could not be recorded (storage.FateStore).
	mFateErrors = "autoconnect_fate_errors_total"

	// Broadcasts, the message limit and the public port's plain HTTP.
	mBroadcastPollOK    = `autoconnect_broadcast_polls_total{result="ok"}`
	mBroadcastPollError = `autoconnect_broadcast_polls_total{result="error"}`
	mBroadcastChanges   = "autoconnect_broadcast_changes_total"
	mBroadcastIDs       = "autoconnect_broadcast_ids"
	mBroadcastSubs      = "autoconnect_broadcast_subscriptions"
	mBroadcastsSent     = "autoconnect_broadcasts_sent_total"
	mBroadcastFanOut    = "autoconnect_broadcast_fanout_seconds"
	mUAIDResets         = "autoconnect_uaid_resets_total"
	mHTTPRequests       = "autoconnect_http_requests_total" // {route}: session.HTTPRoutes
)

// Histogram buckets (upper bounds, seconds). Prometheus histograms, not
// the library's vmrange ones: PromQL's histogram_quantile needs le buckets.
var (
	// latencyBuckets cover a storage call from a local disk (sub-ms) to
	// the storage timeout (5s); apitier uses the same bounds.
	latencyBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}
	// ackBuckets cover a client's ack, from loopback to a phone waking up.
	ackBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}
	// fanOutBuckets cover a broadcast change reaching every client of a
	// node, from a handful to a million.
	fanOutBuckets = []float64{.001, .01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}
)

// engineMetrics are the node's metrics; session holds those the session
// core moves itself, the rest are moved here in the node's glue.
type engineMetrics struct {
	set                                                      *metrics.Set
	session                                                  *session.Metrics
	sent, sentStored, storedOut                              *metrics.Counter
	directBusy, directMiss, directOK, directStale, evictions *metrics.Counter
	apiUnauthorized, apiRefused, storageErrors, fateErrors   *metrics.Counter
	refusedSource, refusedFull, apiAcceptErrors              *metrics.Counter
	storageSeconds                                           *metrics.PrometheusHistogram

	pollOK, pollErrors, broadcastChanges *metrics.Counter
	fanOutSeconds                        *metrics.PrometheusHistogram
}

func newMetrics(srv *Server) *engineMetrics {
	s := metrics.NewSet()
	m := &engineMetrics{
		set: s,
		session: session.NewMetrics(s, session.MetricNames{
			Upgrades: mUpgrades, UpgradesRefused: mUpgradesRefused, UpgradesBad: mUpgradesBad,
			Hellos: mHellos, HelloNewUAID: mHelloNewUAID, Registers: mRegisters, Unregisters: mUnregisters,
			Acked: mNotifAcked, Nacked: mNotifNacked, Expired: mNotifExpired, Pings: mPingsSent,
			Evictions: mEvictions, Overloaded: mOverloaded, DeliveryAck: mDeliveryAck, Errors: mErrors,
			DeliveryAckBuckets: ackBuckets,
			Broadcasts:         mBroadcastsSent, UAIDResets: mUAIDResets, HTTP: mHTTPRequests,
		}),
		sent:            s.NewCounter(mNotifSent),
		sentStored:      s.NewCounter(mNotifSentStored),
		storedOut:       s.NewCounter(mNotifStoredOnExit),
		directBusy:      s.NewCounter(mDirectBusy),
		directMiss:      s.NewCounter(mDirectMiss),
		directStale:     s.NewCounter(mDirectStale),
		directOK:        s.NewCounter(mDirectOK),
		apiUnauthorized: s.NewCounter(mAPIUnauthorized),
		apiRefused:      s.NewCounter(mAPIRefused),
		refusedSource:   s.NewCounter(mRefusedSource),
		refusedFull:     s.NewCounter(mRefusedFull),
		apiAcceptErrors: s.NewCounter(mAPIAcceptErrors),
		storageErrors:   s.NewCounter(mStorageErrors),
		fateErrors:      s.NewCounter(mFateErrors),
		storageSeconds:  s.NewPrometheusHistogramExt(mStorageSeconds, latencyBuckets),

		pollOK:           s.NewCounter(mBroadcastPollOK),
		pollErrors:       s.NewCounter(mBroadcastPollError),
		broadcastChanges: s.NewCounter(mBroadcastChanges),
		fanOutSeconds:    s.NewPrometheusHistogramExt(mBroadcastFanOut, fanOutBuckets),
	}
	// One counter, moved by both: the session evicts local connections,
	// the glue counts remote evictions.
	m.evictions = m.session.Evictions
	s.NewGauge(mConnections, func() float64 { return float64(srv.connections.Load()) })
	s.NewGauge(mClients, func() float64 { return float64(srv.registry.len()) })
	s.NewGauge(mInFlight, func() float64 { return float64(srv.env.InFlight.Load()) })
	s.NewGauge(mPendingWork, func() float64 { return float64(srv.pending.Load()) })
	s.NewGauge(mBroadcastIDs, func() float64 { return float64(srv.env.Broadcasts.Known()) })
	s.NewGauge(mBroadcastSubs, func() float64 { return float64(srv.env.Broadcasts.Subs()) })
	s.NewGauge(mAPIConnections, func() float64 {
		if srv.apiLn == nil {
			return 0
		}
		return float64(srv.apiLn.Open())
	})
	s.NewGauge(mDraining, func() float64 { return bool01(srv.env.Draining.Load()) })
	s.NewGauge(mStorageDown, func() float64 { return bool01(srv.env.StorageDown.Load()) })
	s.NewGauge(mOwedWrites, func() float64 { return float64(srv.owing()) })
	return m
}

func bool01(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
