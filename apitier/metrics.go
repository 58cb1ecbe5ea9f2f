package apitier

import (
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/autopush-go/autopush/internal/errno"
	"github.com/autopush-go/autopush/internal/nodeapi"
)

// Metric names of the endpoint node, one place (docs/metrics.md and the
// dashboards in ops/ are checked against them). Labelled families are listed
// by their name; the label values are below.
const (
	// mRequests{route,code}: every request, by route label and status.
	mRequests = "autoendpoint_requests_total"
	// mRequestSeconds{route}: handler latency, from routing to the reply.
	mRequestSeconds = "autoendpoint_request_seconds"
	// mErrors{errno}: error replies by errno ("none" for errno null).
	mErrors = "autoendpoint_errors_total"
	// mNotifications{outcome}: accepted pushes: direct (written to a
	X
	mNotifications = "autoendpoint_notifications_total"
	// mNotificationBytes: size of the accepted payloads (base64url).
	mNotificationBytes = "autoendpoint_notification_data_bytes"
	// mEncodings{encoding}: accepted pushes by Content-Encoding.
	mEncodings = "autoendpoint_notification_encoding_total"
	// mNodeCalls{call,result}: calls to connection nodes' internal API.
	mNodeCalls = "autoendpoint_node_calls_total"
	// mNodeSeconds{call}: their latency.
	mNodeSeconds = "autoendpoint_node_call_seconds"
	// mNodeCleared: node_id cleared after a node did not have the client.
	mNodeCleared = "autoendpoint_node_cleared_total"
	// mRouteCache{result}: pushes sent on a cached route (apitier/routecache):
	// delivered, or not and routed again from storage.
	mRouteCache = "autoendpoint_route_cache_total"
	// mStorageSeconds, mStorageErrors: storage calls of requests.
	mStorageSeconds = "autoendpoint_storage_seconds"
	mStorageErrors  = "autoendpoint_storage_errors_total"
	// mVAPID{result}: pushes with an Authorization header: ok, failed.
	mVAPID = "autoendpoint_vapid_total"
	// mVAPIDFormerAud: tokens accepted for a vapid-former-aud origin.
	mVAPIDFormerAud = "autoendpoint_vapid_former_aud_total"
	// mVAPIDFailures{rule}: VAPID refusals by the rule that failed: the
	// vapid.Rule* names ("signature", "exp-past", "key-mismatch",
	// "header" for a v2 endpoint pushed without VAPID, ...).
	mVAPIDFailures = "autoendpoint_vapid_failures_total"
	// mDeletes{result}: DELETE /m/{id}: deleted, withdrawn (a bridged
	// push still in the sender), invalid.
	mDeletes = "autoendpoint_message_deletes_total"
	// mConnections: connections open on the listener.
	mConnections = "autoendpoint_connections"
	// mConnsRefused: connections refused over max-connections.
	mConnsRefused = "autoendpoint_connections_refused_total"
	// mConnsRefusedSource: connections refused over
	// max-connections-per-source.
	mConnsRefusedSource = "autoendpoint_connections_refused_per_source_total"
	// mAcceptErrors: accepts that failed for want of file descriptors or
	// kernel memory, waited out.
	mAcceptErrors = "autoendpoint_accept_errors_total"
)

// Route labels of mRequests and mRequestSeconds.
const (
	routeWPushV1   = "wpush_v1"
	routeWPushV2   = "wpush_v2"
	routeWPushBad  = "wpush_other" // an unknown API version in the path
	routeMessage   = "message"
	routeHeartbeat = "heartbeat"
	routeLB        = "lbheartbeat"
	routeVersion   = "version"
	routeHealth    = "health"
	routeStatus    = "status"
	// routeMilestones: GET /__milestones__, the reference's report
	// (reference-milestones; 404 when off).
	routeMilestones = "milestones"
	routeOptions    = "options"
	routeNotFound   = "not_found"
	routeNoMethod   = "method_not_allowed"
	// routeUnparsed: requests Hertz refused before routing them: a
	// header it could not parse, too large or too slow (400, 431, 408).
	routeUnparsed = "unparsed"
	// routeUnrouted: requests its router refused without a route: no
	// Host, a path not starting with '/' (400).
	routeUnrouted = "unrouted"
)

// routeLabels are this package's route labels; the APIs of their own
// packages bring theirs (newMetrics).
var routeLabels = []string{routeWPushV1, routeWPushV2, routeWPushBad, routeMessage, routeHeartbeat, routeLB,
	routeVersion, routeHealth, routeStatus, routeMilestones, routeOptions, routeNotFound, routeNoMethod,
	routeUnparsed, routeUnrouted}

// Outcomes of an accepted push (mNotifications).
const (
	outcomeDirect  = "direct"
	outcomeStored  = "stored"
	outcomeDropped = "dropped"
	outcomeBridged = "bridged" // queued to a bridge's provider (bridged.go)
)

// Node call results (mNodeCalls{call,result}; call is nodeapi.Call).
const (
	resultOK          = "ok"          // 200 (push: delivered; notif: checking)
	resultAccepted    = "accepted"    // 202 (notif: will check once acks drain)
	resultNotHere     = "not_here"    // 404
	resultBusy        = "busy"        // 503
	resultStale       = "stale"       // 409 (push on a cached route: apitier/routecache)
	resultUnreachable = "unreachable" // connect error, timeout, reset
	resultRefused     = "refused"     // any other status (401: node-secret mismatch)
)

var nodeResults = []string{resultOK, resultAccepted, resultNotHere, resultBusy, resultStale, resultUnreachable, resultRefused}

// Histogram buckets (upper bounds). Prometheus histograms, not the
// library's vmrange ones: PromQL's histogram_quantile needs le buckets.
var (
	// latencyBuckets, seconds: a storage call on local disk (sub-ms) up to
	// the storage and node timeouts (5s, 3s); the engine uses the same.
	latencyBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}
	// dataBuckets, base64url characters: no payload, then powers of two
	// up to storage's 16 KiB limit (the default max is 7,507).
	dataBuckets = []float64{0, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384}
)

type apiMetrics struct {
	set *metrics.Set

	mu       sync.RWMutex
	requests []map[int]*metrics.Counter // by route index, then status
	seconds  map[string]*metrics.PrometheusHistogram
	routeIdx map[string]int

	errnos              map[errno.Code]*metrics.Counter
	outcomes            map[string]*metrics.Counter
	encodings           map[string]*metrics.Counter
	nodeCalls           map[[2]string]*metrics.Counter
	nodeSeconds         map[string]*metrics.PrometheusHistogram
	dataBytes           *metrics.PrometheusHistogram
	nodeCleared         *metrics.Counter
	routeHit, routeMiss *metrics.Counter
	storageSecs         *metrics.PrometheusHistogram
	storageErrors       *metrics.Counter
	vapidOK             *metrics.Counter
	vapidFormerAud      *metrics.Counter
	vapidFailed         *metrics.Counter
	vapidRules          sync.Map // rule -> *metrics.Counter
	deleted             *metrics.Counter
	deleteInvalid       *metrics.Counter
	withdrawn           *metrics.Counter
	connsRefused        *metrics.Counter
	connsRefusedSource  *metrics.Counter
	acceptErrors        *metrics.Counter
}

// newMetrics makes the node's metrics; open reports the connections the
// listener holds, apis are the routes of the APIs of their own packages
// (their labels join routeLabels).
func newMetrics(open func() int, apis []routeDef) *apiMetrics {
	s := metrics.NewSet()
	m := &apiMetrics{
		set:                s,
		seconds:            map[string]*metrics.PrometheusHistogram{},
		routeIdx:           map[string]int{},
		errnos:             map[errno.Code]*metrics.Counter{},
		outcomes:           map[string]*metrics.Counter{},
		encodings:          map[string]*metrics.Counter{},
		nodeCalls:          map[[2]string]*metrics.Counter{},
		nodeSeconds:        map[string]*metrics.PrometheusHistogram{},
		dataBytes:          s.NewPrometheusHistogramExt(mNotificationBytes, dataBuckets),
		nodeCleared:        s.NewCounter(mNodeCleared),
		routeHit:           s.NewCounter(mRouteCache + `{result="delivered"}`),
		routeMiss:          s.NewCounter(mRouteCache + `{result="fallback"}`),
		storageSecs:        s.NewPrometheusHistogramExt(mStorageSeconds, latencyBuckets),
		storageErrors:      s.NewCounter(mStorageErrors),
		vapidOK:            s.NewCounter(mVAPID + `{result="ok"}`),
		vapidFormerAud:     s.NewCounter(mVAPIDFormerAud),
		vapidFailed:        s.NewCounter(mVAPID + `{result="failed"}`),
		deleted:            s.NewCounter(mDeletes + `{result="deleted"}`),
		deleteInvalid:      s.NewCounter(mDeletes + `{result="invalid"}`),
		withdrawn:          s.NewCounter(mDeletes + `{result="withdrawn"}`),
		connsRefused:       s.NewCounter(mConnsRefused),
		connsRefusedSource: s.NewCounter(mConnsRefusedSource),
		acceptErrors:       s.NewCounter(mAcceptErrors),
	}
	s.NewGauge(mConnections, func() float64 { return float64(open()) })
	labels := append([]string(nil), routeLabels...)
	for _, r := range apis {
		if !slices.Contains(labels, r.label) {
			labels = append(labels, r.label)
		}
	}
	for i, r := range labels {
		m.routeIdx[r] = i
		m.requests = append(m.requests, map[int]*metrics.Counter{})
		m.seconds[r] = s.NewPrometheusHistogramExt(mRequestSeconds+`{route="`+r+`"}`, latencyBuckets)
	}
	m.errnos[errno.None] = s.NewCounter(mErrors + `{errno="none"}`)
	for _, in := range errno.Table() {
		m.errnos[in.Errno] = s.NewCounter(mErrors + `{errno="` + strconv.Itoa(int(in.Errno)) + `"}`)
	}
	for _, o := range []string{outcomeDirect, outcomeStored, outcomeDropped, outcomeBridged} {
		m.outcomes[o] = s.NewCounter(mNotifications + `{outcome="` + o + `"}`)
	}
	for _, e := range []string{"aes128gcm", "aesgcm", "none"} {
		m.encodings[e] = s.NewCounter(mEncodings + `{encoding="` + e + `"}`)
	}
	for _, call := range []string{nodeapi.CallPush.String(), nodeapi.CallNotif.String()} {
		m.nodeSeconds[call] = s.NewPrometheusHistogramExt(mNodeSeconds+`{call="`+call+`"}`, latencyBuckets)
		for _, r := range nodeResults {
			m.nodeCalls[[2]string{call, r}] = s.NewCounter(mNodeCalls + `{call="` + call + `",result="` + r + `"}`)
		}
	}
	return m
}

// request counts one finished request of route with status code.
func (m *apiMetrics) request(route string, code int, d time.Duration) {
	i, ok := m.routeIdx[route]
	if !ok {
		return
	}
	m.seconds[route].Update(d.Seconds())
	m.mu.RLock()
	c := m.requests[i][code]
	m.mu.RUnlock()
	if c == nil {
		m.mu.Lock()
		if c = m.requests[i][code]; c == nil {
			c = m.set.NewCounter(mRequests + `{route="` + route + `",code="` + strconv.Itoa(code) + `"}`)
			m.requests[i][code] = c
		}
		m.mu.Unlock()
	}
	c.Inc()
}

func (m *apiMetrics) errno(e errno.Code) {
	if c := m.errnos[e]; c != nil {
		c.Inc()
	}
}

func (m *apiMetrics) outcome(o string, dataLen int) {
	m.outcomes[o].Inc()
	m.dataBytes.Update(float64(dataLen))
}

func (m *apiMetrics) encoding(e string) {
	if e == "" {
		e = "none"
	}
	if c := m.encodings[e]; c != nil {
		c.Inc()
	}
}

// routeCache counts a push sent on a cached route: delivered or not.
func (m *apiMetrics) routeCache(delivered bool) {
	if delivered {
		m.routeHit.Inc()
	} else {
		m.routeMiss.Inc()
	}
}

// nodeCall observes one call to a connection node (nodeapi.ClientConfig.Observe).
func (m *apiMetrics) nodeCall(call nodeapi.Call, status int, err error, d time.Duration) {
	result := resultRefused
	switch {
	case err != nil:
		result = resultUnreachable
	case status == http.StatusOK:
		result = resultOK
	case status == http.StatusAccepted:
		result = resultAccepted
	case status == http.StatusNotFound:
		result = resultNotHere
	case status == http.StatusServiceUnavailable:
		result = resultBusy
	case status == http.StatusConflict:
		result = resultStale
	}
	name := call.String()
	m.nodeCalls[[2]string{name, result}].Inc()
	m.nodeSeconds[name].Update(d.Seconds())
}

// vapidFailure counts a refusal by rule (vapid.Rule*).
func (m *apiMetrics) vapidFailure(rule string) {
	m.vapidFailed.Inc()
	if c, ok := m.vapidRules.Load(rule); ok {
		c.(*metrics.Counter).Inc()
		return
	}
	c := m.set.GetOrCreateCounter(mVAPIDFailures + `{rule="` + rule + `"}`)
	m.vapidRules.Store(rule, c)
	c.Inc()
}

// storage times one storage call and counts its failure.
func (m *apiMetrics) storage(start time.Time, err error) {
	m.storageSecs.UpdateDuration(start)
	if err != nil {
		m.storageErrors.Inc()
	}
}
