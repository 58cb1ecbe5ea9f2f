package apitier

import (
	"bytes"
	"context"
	"testing"

	"github.com/cloudwego/hertz/pkg/app"
	"github.com/cloudwego/hertz/pkg/app/server"
)

// The in-process half of the API tier's benchmarks (bench_test.go has the
// rest, run behind a whole stack): one request through the handlers, no
// HTTP on the application server's side.

// BenchBody is a typical encrypted payload, bytes.
const BenchBody = 3000

// InProcess runs POSTs to path through s's handlers with one reused
// RequestContext, each expecting status want.
func InProcess(b *testing.B, s *Server, path string, want int, kv ...string) {
	h := s.newHertz(server.WithHostPorts("127.0.0.1:0"))
	c := app.NewContext(16)
	body := bytes.Repeat([]byte{0x5A}, BenchBody)
	ctx := context.Background()
	b.ReportAllocs()
	b.SetBytes(BenchBody)
	b.ResetTimer()
	for range b.N {
		c.Reset()
		c.Request.Header.SetMethod("POST")
		c.Request.SetRequestURI(path)
		c.Request.Header.Set("TTL", "600")
		c.Request.Header.Set("Content-Encoding", "aes128gcm")
		for i := 0; i+1 < len(kv); i += 2 {
			c.Request.Header.Set(kv[i], kv[i+1])
		}
		c.Request.SetBody(body)
		h.Engine.ServeHTTP(ctx, c)
		if c.Response.StatusCode() != want {
			b.Fatalf("status %d: %s", c.Response.StatusCode(), c.Response.Body())
		}
	}
}

// Outcomes counts the pushes s delivered directly and stored.
func Outcomes(s *Server) (direct, stored uint64) {
	return s.metrics.outcomes[outcomeDirect].Get(), s.metrics.outcomes[outcomeStored].Get()
}

// BenchmarkHandlerVAPID: a v2 push with VAPID, the token reused as
// application servers do (verified once, then from the cache), and with
// the cache off (one signature check per push). TTL 0 and no client: no
// storage write.
func BenchmarkHandlerVAPID(b *testing.B) {
	for _, c := range []struct {
		name  string
		cache int
	}{{"cached", DefaultConfig().VAPIDCache}, {"uncached", 0}} {
		b.Run(c.name, func(b *testing.B) {
			s := newServer(b, newStore(b), func(cfg *Config) { cfg.VAPIDCache = c.cache })
			key := newVAPIDKey(b)
			u := subscribe(b, s, "", key.pub)
			InProcess(b, s, u.path, 201, "TTL", "0", "Authorization", key.auth(b, testEndpointURL))
		})
	}
}
