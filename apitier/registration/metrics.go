package registration

import (
	"io"

	"github.com/VictoriaMetrics/metrics"
)

// mAuthFailures{reason}: registration API calls refused 401: closed (no
// bridge-auth-keys), missing (no bearer secret), invalid (a secret no
// key verifies). The node's other series (requests by route, errors by
// errno, storage calls) count these routes too (apitier/metrics.go).
const mAuthFailures = "autoendpoint_bridge_auth_failures_total"

type apiMetrics struct {
	set  *metrics.Set
	auth map[string]*metrics.Counter // by reason
}

func newMetrics() *apiMetrics {
	m := &apiMetrics{set: metrics.NewSet(), auth: map[string]*metrics.Counter{}}
	for _, r := range []string{authClosed, authMissing, authInvalid} {
		m.auth[r] = m.set.NewCounter(mAuthFailures + `{reason="` + r + `"}`)
	}
	return m
}

// authFailure counts a call refused 401.
func (m *apiMetrics) authFailure(reason string) { m.auth[reason].Inc() }

// WriteMetrics writes the API's own series in the Prometheus text
// format (the node's /metrics serves them).
func (a *API) WriteMetrics(w io.Writer) { a.metrics.set.WritePrometheus(w) }
