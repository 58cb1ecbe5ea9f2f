package apitier

import (
	"context"
	"net/http"
	"time"

	"github.com/cloudwego/hertz/pkg/app"
)

// CORS, as the reference: any origin may push and cancel from a browser
// (autopush-rs: actix-cors allowing any origin and header, DELETE, GET,
// POST and PUT, max age 3600; autopush: Access-Control-Allow-Origin: *
// and the push headers). Every response carries
// Access-Control-Allow-Origin: * and exposes Location (and TTL, and the
// VAPID challenge); an OPTIONS preflight is answered 200 on any path
// with the methods, the requested headers (or the push headers when none
// are named) and a max age, and goes no further.
const (
	corsMethods = "DELETE, GET, POST, PUT"
	corsHeaders = "authorization, content-encoding, content-type, crypto-key, encryption, encryption-key, ttl, topic, urgency"
	corsExpose  = "location, ttl, www-authenticate"
	corsMaxAge  = "3600"
)

func (s *Server) cors(ctx context.Context, c *app.RequestContext) {
	h := &c.Response.Header
	h.Set("Access-Control-Allow-Origin", "*")
	h.Set("Access-Control-Expose-Headers", corsExpose)
	if string(c.Method()) != http.MethodOptions {
		c.Next(ctx)
		return
	}
	start := time.Now()
	h.Set("Access-Control-Allow-Methods", corsMethods)
	if req := c.Request.Header.Peek("Access-Control-Request-Headers"); len(req) > 0 {
		h.SetBytesV("Access-Control-Allow-Headers", req)
	} else {
		h.Set("Access-Control-Allow-Headers", corsHeaders)
	}
	h.Set("Access-Control-Max-Age", corsMaxAge)
	c.AbortWithStatus(http.StatusOK)
	s.metrics.request(routeOptions, http.StatusOK, time.Since(start))
}
