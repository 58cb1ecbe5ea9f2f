package apitier

import (
	"context"
	"net/http"
	"strconv"
	"strings"

	"github.com/cloudwego/hertz/pkg/app"

	"github.com/autopush-go/autopush/apitier/httpapi"
	"github.com/autopush-go/autopush/internal/errno"
	"github.com/autopush-go/autopush/internal/listener"
)

// What guards the listener and the answers Hertz would give itself:
//
//   - Deadlines (internal/listener): a request, header and body, must
//     arrive within request-timeout of its first byte (of accept for a
//     connection's first request), each write within write-timeout; at
//     most max-connections are open, max-connections-per-source from one
//     source address.
//   - Every answer is JSON: those Hertz writes before any handler runs (a
//     request it cannot parse, a header too large, a header that timed
//     out) are replaced at the connection by the JSON error for their
//     status (unhandled); those its router gives without a route (no
//     Host, a path not starting with '/') get their body here (guard).
//   - A body nobody read is never drained: after an answer to a request
//     whose body was not read (an error before it, or a route that takes
//     none) the connection closes without reading it (handle, server.go).

// guard runs first on every routed request: the listener learns that
// what is written now is a handler's answer, and an error answer Hertz
// gave without a body gets the JSON one.
func (s *Server) guard(ctx context.Context, c *app.RequestContext) {
	conn := listener.FromContext(ctx)
	conn.Routed()
	c.Next(ctx)
	if code := c.Response.StatusCode(); code >= 400 && len(c.Response.Body()) == 0 {
		// Hertz's router refused the request before any route (a missing
		// Host on HTTP/1.1, a path not starting with '/').
		e := statusError(code)
		s.metrics.request(routeUnrouted, code, 0)
		c.Response.Header.SetContentTypeBytes(jsonType)
		bb := c.Response.BodyBuffer()
		bb.B = e.AppendJSON(bb.B[:0])
		s.metrics.errno(e.Errno)
		c.SetConnectionClose()
		if hasBody(c) {
			conn.AbandonBody()
		}
	}
}

// hasBody reports whether the request announced a body (a Content-Length
// above 0, or chunked).
func hasBody(c *app.RequestContext) bool {
	n := c.Request.Header.ContentLength()
	return n > 0 || n == -1
}

// Messages of the errors only the HTTP layer gives (errno null).
var statusMessages = map[int]string{
	http.StatusBadRequest:                  "Could not parse the request",
	http.StatusRequestTimeout:              "The request did not arrive within the time allowed",
	http.StatusRequestEntityTooLarge:       "The request body is too large",
	http.StatusRequestHeaderFieldsTooLarge: "The request header is too large",
	http.StatusServiceUnavailable:          "Too many connections; retry later",
}

// statusError is the JSON error for an answer the HTTP layer chose.
func statusError(code int) *errno.HTTPError {
	msg, ok := statusMessages[code]
	if !ok {
		msg = http.StatusText(code)
	}
	return errno.Unnumbered(code, msg)
}

// errTooManyConns is written to a connection over max-connections, and
// errTooManyFromSource to one over max-connections-per-source.
var (
	errTooManyConns      = statusError(http.StatusServiceUnavailable)
	errTooManyFromSource = errno.Unnumbered(http.StatusServiceUnavailable, "Too many connections from this address; retry later")
)

var jsonType = []byte("application/json")

// rawAnswer is a whole HTTP/1.1 answer carrying e, closing the
// connection, for the listener to write where no handler runs.
func rawAnswer(e *errno.HTTPError) []byte {
	body := e.AppendJSON(nil)
	var b []byte
	b = append(b, "HTTP/1.1 "...)
	b = strconv.AppendInt(b, int64(e.Status), 10)
	b = append(b, ' ')
	b = append(b, http.StatusText(e.Status)...)
	b = append(b, "\r\nContent-Type: application/json\r\nContent-Length: "...)
	b = strconv.AppendInt(b, int64(len(body)), 10)
	b = append(b, "\r\nConnection: close\r\nAccess-Control-Allow-Origin: *\r\n"...)
	if e.Status == http.StatusServiceUnavailable {
		b = append(b, "Retry-After: "...)
		b = strconv.AppendInt(b, httpapi.RetryAfter, 10)
		b = append(b, "\r\n"...)
	}
	b = append(b, "\r\n"...)
	return append(b, body...)
}

// unhandled is the listener's Config.Unhandled: Hertz writes an answer
// before any handler ran only for a request it refused (and then closes
// the connection), or "100 Continue". The refusal is replaced by the
// same status as JSON (408 when a read deadline passed: Hertz calls a
// header cut by its deadline a parse error); anything else passes.
func (s *Server) unhandled(p []byte, timedOut bool) []byte {
	if len(p) < 12 || string(p[:7]) != "HTTP/1." || p[8] != ' ' {
		return nil
	}
	code, err := strconv.Atoi(string(p[9:12]))
	if err != nil || code < 400 || code > 599 {
		return nil
	}
	if timedOut {
		code = http.StatusRequestTimeout
	}
	s.metrics.request(routeUnparsed, code, 0)
	e := statusError(code)
	s.metrics.errno(e.Errno)
	return rawAnswer(e)
}

// handleNoMethod answers 405 with the methods the path takes (RFC 9110
// §15.5.6); OPTIONS, the CORS preflight, is taken on every path.
func (s *Server) handleNoMethod(_ context.Context, c *app.RequestContext, st *reqState) {
	c.Response.Header.Set("Allow", s.allow(string(c.Request.URI().Path())))
	st.x.Fail(errNoMethod)
}

// allow lists the methods of the routes matching path, then OPTIONS.
func (s *Server) allow(path string) string {
	var methods []string
	for _, r := range s.routeTable() {
		if matchPath(r.Path, path) && !contains(methods, r.Method) {
			methods = append(methods, r.Method)
		}
	}
	return strings.Join(append(methods, http.MethodOptions), ", ")
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// matchPath reports whether path matches a Hertz pattern whose ":name"
// segments match any one non-empty segment.
func matchPath(pattern, path string) bool {
	ps, xs := strings.Split(pattern, "/"), strings.Split(path, "/")
	if len(ps) != len(xs) {
		return false
	}
	for i, p := range ps {
		if strings.HasPrefix(p, ":") {
			if xs[i] == "" {
				return false
			}
		} else if p != xs[i] {
			return false
		}
	}
	return true
}
