package engine

import (
	"github.com/VictoriaMetrics/metrics"
)

// Metric names of the connection node, one place (the operations issue's
// dashboard and docs check against them).
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
	mEvictions         = "autoconnect_evictions_total"
	mPingsSent         = "autoconnect_pings_sent_total"
	mAPIUnauthorized   = "autoconnect_node_api_unauthorized_total"
	mStorageSeconds    = "autoconnect_storage_seconds"
	mDeliveryAck       = "autoconnect_delivery_ack_seconds"
	mDraining          = "autoconnect_draining"
	mStorageErrors     = "autoconnect_storage_errors_total"
	mOverloaded        = "autoconnect_overloaded_total"
)

// Histogram buckets (upper bounds, seconds). Prometheus histograms, not
// the library's vmrange ones: PromQL's histogram_quantile needs le buckets.
var (
	// latencyBuckets cover a storage call from a local disk (sub-ms) to
	// the storage timeout (5s); apitier uses the same bounds.
	latencyBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}
	// ackBuckets cover a client's ack, from loopback to a phone waking up.
	ackBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}
)

// errorKinds are the labels of autoconnect_errors_total: why a connection
// was closed or a message refused.
var errorKinds = []string{"bad_frame", "bad_json", "unknown_type", "no_hello", "hello_timeout",
	"pong_timeout", "ping_abuse", "bad_channel", "bad_key", "too_large", "storage", "binary_frame", "slow_reader"}

type engineMetrics struct {
	set                                                 *metrics.Set
	upgrades, upgradesRefused, upgradesBad              *metrics.Counter
	hellos, helloNewUAID, registers, unregisters        *metrics.Counter
	sent, sentStored, acked, nacked, expired, storedOut *metrics.Counter
	directBusy, directMiss, directOK, evictions, pings  *metrics.Counter
	apiUnauthorized, storageErrors, overloaded          *metrics.Counter
	storageSeconds, deliveryAck                         *metrics.PrometheusHistogram
	errors                                              map[string]*metrics.Counter
}

func newMetrics(srv *Server) *engineMetrics {
	s := metrics.NewSet()
	m := &engineMetrics{
		set:             s,
		upgrades:        s.NewCounter(mUpgrades),
		upgradesRefused: s.NewCounter(mUpgradesRefused),
		upgradesBad:     s.NewCounter(mUpgradesBad),
		hellos:          s.NewCounter(mHellos),
		helloNewUAID:    s.NewCounter(mHelloNewUAID),
		registers:       s.NewCounter(mRegisters),
		unregisters:     s.NewCounter(mUnregisters),
		sent:            s.NewCounter(mNotifSent),
		sentStored:      s.NewCounter(mNotifSentStored),
		acked:           s.NewCounter(mNotifAcked),
		nacked:          s.NewCounter(mNotifNacked),
		expired:         s.NewCounter(mNotifExpired),
		storedOut:       s.NewCounter(mNotifStoredOnExit),
		directBusy:      s.NewCounter(mDirectBusy),
		directMiss:      s.NewCounter(mDirectMiss),
		directOK:        s.NewCounter(mDirectOK),
		evictions:       s.NewCounter(mEvictions),
		pings:           s.NewCounter(mPingsSent),
		apiUnauthorized: s.NewCounter(mAPIUnauthorized),
		storageErrors:   s.NewCounter(mStorageErrors),
		overloaded:      s.NewCounter(mOverloaded),
		storageSeconds:  s.NewPrometheusHistogramExt(mStorageSeconds, latencyBuckets),
		deliveryAck:     s.NewPrometheusHistogramExt(mDeliveryAck, ackBuckets),
		errors:          map[string]*metrics.Counter{},
	}
	for _, k := range errorKinds {
		m.errors[k] = s.NewCounter(`autoconnect_errors_total{kind="` + k + `"}`)
	}
	s.NewGauge(mConnections, func() float64 { return float64(srv.connections.Load()) })
	s.NewGauge(mClients, func() float64 { return float64(srv.registry.len()) })
	s.NewGauge(mInFlight, func() float64 { return float64(srv.inFlight.Load()) })
	s.NewGauge(mDraining, func() float64 {
		if srv.draining.Load() {
			return 1
		}
		return 0
	})
	return m
}

func (m *engineMetrics) fail(kind string) {
	if c := m.errors[kind]; c != nil {
		c.Inc()
	}
}
