package pushapi

import (
	"io"

	"github.com/VictoriaMetrics/metrics"

	"github.com/autopush-go/autopush/sender/ratelimit"
)

// Metric names of the push API (docs/metrics.md). The node's other series
// (requests by route, errors by errno) count these routes too
// (apitier/metrics.go).
const (
	// mPosts{client,result}: POST /push by client and result.
	mPosts = "autoendpoint_push_posts_total"
	// mOutstanding{client}: the client's open pushes as this node last
	// counted them (clients with an outstanding quota).
	mOutstanding = "autoendpoint_push_outstanding"
	// mClientsReloads{result}: reloads of push-clients-file.
	mClientsReloads = "autoendpoint_push_clients_reloads_total"
)

// Results of mPosts.
const (
	postAccepted        = "accepted"         // 201, a new push
	postRepeat          = "repeat"           // 201, an Idempotency-Key's first push
	postOverRate        = "over_rate"        // 429
	postOverOutstanding = "over_outstanding" // 429
	postRefused         = "refused"          // any other answer: 400, 403, 503
)

var postResults = []string{postAccepted, postRepeat, postOverRate, postOverOutstanding, postRefused}

type apiMetrics struct {
	set      *metrics.Set
	reloadOK *metrics.Counter
	reloadNo *metrics.Counter
}

func newMetrics() *apiMetrics {
	s := metrics.NewSet()
	return &apiMetrics{set: s,
		reloadOK: s.NewCounter(mClientsReloads + `{result="ok"}`),
		reloadNo: s.NewCounter(mClientsReloads + `{result="error"}`)}
}

// client serves a client's series (from its load on): every result, and
// its open count when it has an outstanding quota. Names are metric-safe
// (clients.ValidName).
func (m *apiMetrics) client(name string, q *ratelimit.ClientQuota) {
	for _, r := range postResults {
		m.set.GetOrCreateCounter(mPosts + `{client="` + name + `",result="` + r + `"}`)
	}
	if q.Outstanding() > 0 {
		m.set.GetOrCreateGauge(mOutstanding+`{client="`+name+`"}`, q.OpenCount)
	}
}

// post counts a POST of client with result.
func (m *apiMetrics) post(client, result string) {
	m.set.GetOrCreateCounter(mPosts + `{client="` + client + `",result="` + result + `"}`).Inc()
}

// WriteMetrics writes the push API's series in the Prometheus text format
// (the node's /metrics serves them).
func (a *API) WriteMetrics(w io.Writer) { a.metrics.set.WritePrometheus(w) }
