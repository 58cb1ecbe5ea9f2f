package apitier

// Route is one method and path pattern the HTTP API registers, in Hertz's
// syntax (":name" is a path parameter).
type Route struct {
	Method, Path string
}

// Routes lists every route the HTTP API registers, so the OpenAPI
// document in docs/ can be checked against the server itself. The CORS
// preflight (OPTIONS on any path) and the JSON 404/405 answers are
// middleware and fallbacks, not routes. Safe to call before Start, and
// concurrently: it serves nothing.
func (s *Server) Routes() []Route {
	var out []Route
	for _, r := range s.routeTable() {
		out = append(out, r.Route)
	}
	return out
}
