package apitier

import (
	"context"
	"crypto/subtle"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/autopush-go/autopush/internal/endpointdiag"
	"github.com/autopush-go/autopush/internal/errno"
	"github.com/autopush-go/autopush/internal/protocol"
	"github.com/autopush-go/autopush/storage"
)

// The admin routes, on metrics-listen beside /metrics, for the operator:
// each needs "Authorization: Bearer <token>" with a token of
// admin-tokens (none: closed, 401).
//
//	GET /__endpoint__?endpoint=<endpoint URL or token> | ?uaid=<UAID>
//	    [&limit=N] [&format=json|text]
//
// answers endpointdiag's report from the running store: what
// tools/cmd/endpointdiag prints (-json for the JSON), which cannot open
// the embedded store while the node holds it.

var (
	errAdminClosed = errno.InvalidAuth.HTTPError("The admin routes are closed on this node: set admin-tokens")
	errAdminAuth   = errno.InvalidAuth.HTTPError("Missing or invalid admin token")
)

// maxDiagLimit bounds a diagnosis' limit: the messages listed of each
// kind (the store reads at most storage.MaxFetchLimit topic messages).
const maxDiagLimit = storage.MaxFetchLimit

// serveEndpointDiag is GET endpointdiag.Route.
func (s *Server) serveEndpointDiag(w http.ResponseWriter, r *http.Request) {
	if e := s.adminGate(r); e != nil {
		w.Header().Set("WWW-Authenticate", `Bearer realm="admin"`)
		writeOpsError(w, e)
		return
	}
	which, value, limit, text, e := diagParams(r.URL.Query())
	if e != nil {
		writeOpsError(w, e)
		return
	}
	q, err := endpointdiag.Parse(s.keys, value)
	if err == nil && (q.Endpoint == nil) != (which == "uaid") {
		err = errors.New(which + ": " + strconv.Quote(value) + " is not one (endpoint takes an endpoint URL or token, uaid a UAID)")
	}
	if err != nil {
		writeOpsError(w, errno.Unnumbered(http.StatusBadRequest, err.Error()))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.StorageTimeout)
	defer cancel()
	rep, err := endpointdiag.Diagnose(ctx, s.store, q, limit)
	if err != nil {
		writeOpsError(w, s.storageError("endpoint diagnosis", err))
		return
	}
	if text {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		rep.WriteText(w)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	rep.WriteJSON(w)
}

// adminGate refuses a request without an admin token (nil: it may go
// on). Tokens compare in constant time.
func (s *Server) adminGate(r *http.Request) *errno.HTTPError {
	if len(s.cfg.AdminTokens) == 0 {
		return errAdminClosed
	}
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "bearer") || tok == "" {
		return errAdminAuth
	}
	match := 0
	for _, want := range s.cfg.AdminTokens {
		match |= subtle.ConstantTimeCompare([]byte(tok), []byte(want))
	}
	if match != 1 {
		return errAdminAuth
	}
	return nil
}

// diagParams reads the diagnosis' query: exactly one of endpoint and
// uaid, an optional limit (1 to maxDiagLimit, default
// endpointdiag.DefaultLimit) and format (json, the default, or text);
// any other parameter, or one given twice, is refused.
func diagParams(q url.Values) (which, value string, limit int, text bool, e *errno.HTTPError) {
	bad := func(msg string) (string, string, int, bool, *errno.HTTPError) {
		return "", "", 0, false, errno.Unnumbered(http.StatusBadRequest, msg)
	}
	for k, v := range q {
		switch {
		case k != "endpoint" && k != "uaid" && k != "limit" && k != "format":
			return bad("unknown parameter " + strconv.Quote(k) + " (endpoint or uaid, limit, format)")
		case len(v) != 1:
			return bad("parameter " + k + " given more than once")
		}
	}
	_, hasEndpoint := q["endpoint"]
	_, hasUAID := q["uaid"]
	switch {
	case hasEndpoint == hasUAID:
		return bad("give exactly one of endpoint (an endpoint URL or token) and uaid")
	case hasEndpoint:
		which, value = "endpoint", q.Get("endpoint")
	default:
		which, value = "uaid", q.Get("uaid")
		if _, ok := protocol.ParseUAID(value); !ok {
			return bad("uaid: " + strconv.Quote(value) + " is not 32 hex digits or a UUID")
		}
	}
	limit = endpointdiag.DefaultLimit
	if l, ok := q["limit"]; ok {
		n, err := strconv.Atoi(l[0])
		if err != nil || n < 1 || n > maxDiagLimit {
			return bad("limit: " + strconv.Quote(l[0]) + " is not a number from 1 to " + strconv.Itoa(maxDiagLimit))
		}
		limit = n
	}
	switch q.Get("format") {
	case "", "json":
	case "text":
		text = true
	default:
		return bad("format: " + strconv.Quote(q.Get("format")) + " is not json or text")
	}
	return which, value, limit, text, nil
}

// writeOpsError answers e on the operations listener, as JSON with its
// errno.
func writeOpsError(w http.ResponseWriter, e *errno.HTTPError) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.Status)
	w.Write(e.AppendJSON(nil))
}
