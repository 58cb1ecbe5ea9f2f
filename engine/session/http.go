package session

import (
	"errors"
	"strconv"
	"strings"

	"github.com/autopush-go/autopush/engine/ws"
	"github.com/autopush-go/autopush/internal/dockerflow"
	"github.com/autopush-go/autopush/internal/errno"
	"github.com/autopush-go/autopush/internal/jsonscan"
)

// The public port answers plain HTTP like a web server, as the
// reference's autoconnect does: load balancers health-check that port.
// One request per connection (Connection: close), inside the hello
// timeout like any connection, and never a route of the internal node API
// (that lives on its own listener).
//
//	GET /__lbheartbeat__   200 {"status":"ok"}; 503 while the node drains
//	GET /__heartbeat__     storage health: 200 {"status":"ok",...} or 503
//	GET /health            storage health with version and connection count
//	GET /status            200 {"status":"ok","version":...}, no storage call
//	GET /__version__       the version.json file
//	GET / (no Upgrade)     426 Upgrade Required (ws.ErrNotWebSocket)
//	other GETs, any other method: 404 with the API tier's JSON error (errno 102)

// HTTPRoutes label the plain HTTP answers of the public port
// (autoconnect_http_requests_total{route}).
var HTTPRoutes = []string{"lbheartbeat", "heartbeat", "health", "status", "version", "not_found"}

var notFoundBody = string(errno.InvalidEndpoint.HTTPError("Not Found").AppendJSON(nil))

// plainHTTP answers a request that is not a websocket handshake by its
// route; false leaves it to the handshake's own error (a GET / without
// Upgrade keeps its 426, a malformed request its 400).
func (s *Session) plainHTTP(x *Ctx, req *ws.Upgrade, err error) bool {
	if errors.Is(err, ws.ErrMethodNotAllowed) {
		s.answer(x, "not_found", 404, []byte(notFoundBody))
		return true
	}
	if !errors.Is(err, ws.ErrNotWebSocket) {
		return false
	}
	path, _, _ := strings.Cut(req.Path, "?")
	switch path {
	case "/":
		return false
	case "/__lbheartbeat__":
		if x.Draining.Load() {
			s.answer(x, "lbheartbeat", 503, []byte(`{"status":"draining"}`))
		} else {
			s.answer(x, "lbheartbeat", 200, []byte(`{"status":"ok"}`))
		}
	case "/__version__":
		s.answer(x, "version", 200, x.version())
	case "/status":
		b := jsonscan.AppendString([]byte(`{"status":"ok","version":`), x.versionString())
		s.answer(x, "status", 200, append(b, '}'))
	case "/__heartbeat__", "/health":
		// Storage health is a storage call: a job, answered by
		// healthDone. Until then the request's input is ignored.
		s.state = stAnswering
		x.Jobs = append(x.Jobs, Job{Kind: JobHealth, Route: path[1:]})
	default:
		s.answer(x, "not_found", 404, []byte(notFoundBody))
	}
	return true
}

// answer writes one JSON response, counts it under route and closes.
func (s *Session) answer(x *Ctx, route string, status int, body []byte) {
	x.Metrics.http[route].Inc()
	x.Out = ws.AppendHTTPResponse(x.Out, status, string(body), "Content-Type", "application/json")
	s.abort(x)
}

// healthDone answers /__heartbeat__ or /health with what storage said.
func (s *Session) healthDone(x *Ctx, r *Result) {
	status, code := "ok", 200
	if r.Err != nil {
		status, code = "error", 503
	}
	b := []byte(`{"status":"` + status + `","storage":"` + status + `"`)
	route := "heartbeat"
	if r.Job.Route == "health" {
		route = "health"
		b = append(b, `,"version":`...)
		b = jsonscan.AppendString(b, x.versionString())
		b = append(b, `,"connections":`...)
		var n int64
		if x.Connections != nil {
			n = x.Connections()
		}
		b = strconv.AppendInt(b, n, 10)
	}
	b = append(b, `,"draining":`...)
	b = strconv.AppendBool(b, x.Draining.Load())
	s.answer(x, route, code, append(b, '}'))
}

func (e *Env) version() []byte {
	if len(e.Version) == 0 {
		return []byte("{}")
	}
	return e.Version
}

// versionString is the "version" of version.json, "unknown" without one.
func (e *Env) versionString() string { return dockerflow.VersionString(e.Version) }
