package apitier

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/cloudwego/hertz/pkg/app"
	"github.com/cloudwego/hertz/pkg/app/server"
	"github.com/gobwas/ws"
	"github.com/google/uuid"

	"github.com/autopush-go/autopush/engine"
	et "github.com/autopush-go/autopush/engine/enginetest"
	"github.com/autopush-go/autopush/storage/embedded"
)

// Benchmarks of a push through the API tier (docs/benchmarks.md):
//
//   - BenchmarkHandler*: the handler in process, no HTTP on the sender's
//     side: a reused Hertz RequestContext goes through the router, so
//     allocs/op are this tier's per request (plus, for Direct, the
//     node call and the engine's handling of it, in the same process).
//   - BenchmarkPost*: real HTTP over 127.0.0.1 with a keep-alive client,
//     sequential and parallel; allocs/op include the client's.
//
// Storage: the stored path uses the embedded store with fsync (as
// deployed) and, where named NoSync, without (to show the tier's own cost).

const benchBody = 3000 // a typical encrypted payload, bytes

// benchAgent is a connected user agent that acks every notification in
// the background, so direct delivery never finds it busy.
func benchAgent(b *testing.B, st *stack) (*agent, func()) {
	a := st.connect(b, "", uuid.NewString(), "")
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			text, _, err := a.Next(time.Minute)
			if err != nil {
				return
			}
			var m struct {
				ChannelID string `json:"channelID"`
				Version   string `json:"version"`
			}
			if json.Unmarshal([]byte(text), &m) == nil && m.Version != "" {
				a.TrySendFrame(ws.OpText, []byte(`{"messageType":"ack","updates":[{"channelID":"`+m.ChannelID+`","version":"`+m.Version+`","code":100}]}`))
			}
		}
	}()
	return a, func() { a.Close(); <-done }
}

// benchStack is startStack with a store without fsync when noSync.
func benchStack(b *testing.B, noSync bool, mutateNode func(*engine.Config)) *stack {
	store, err := embedded.Open(embedded.Config{Dir: b.TempDir(), NoSync: noSync, Logger: testLogger(b)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { store.Close() })
	ncfg := et.Config()
	ncfg.MaxUnacked = 1 << 20
	if mutateNode != nil {
		mutateNode(&ncfg)
	}
	node := et.Start(b, store, ncfg)
	api := startServer(b, store, nil)
	return &stack{store: store, node: node, api: api}
}

// inProcess runs POSTs to path through the handlers with one reused
// RequestContext.
func inProcess(b *testing.B, s *Server, path string, want int, kv ...string) {
	h := s.newHertz(server.WithHostPorts("127.0.0.1:0"))
	c := app.NewContext(16)
	body := bytes.Repeat([]byte{0x5A}, benchBody)
	ctx := context.Background()
	b.ReportAllocs()
	b.SetBytes(benchBody)
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

func outcomes(s *Server) (direct, stored uint64) {
	return s.metrics.outcomes[outcomeDirect].Get(), s.metrics.outcomes[outcomeStored].Get()
}

func BenchmarkHandlerDirect(b *testing.B) {
	st := benchStack(b, false, nil)
	a, stop := benchAgent(b, st)
	defer stop()
	inProcess(b, st.api, a.path, 201)
	b.StopTimer()
	if d, s := outcomes(st.api); s != 0 {
		b.Fatalf("%d direct, %d stored: the direct path stored", d, s)
	}
}

func BenchmarkHandlerStored(b *testing.B) {
	st := benchStack(b, false, nil)
	a := st.connect(b, "", uuid.NewString(), "")
	a.Close()
	et.Eventually(b, 5*time.Second, "agent gone", func() bool { return st.nodeID(b, a.uaid) == "" })
	inProcess(b, st.api, a.path, 201)
}

func BenchmarkHandlerStoredNoSync(b *testing.B) {
	st := benchStack(b, true, nil)
	a := st.connect(b, "", uuid.NewString(), "")
	a.Close()
	et.Eventually(b, 5*time.Second, "agent gone", func() bool { return st.nodeID(b, a.uaid) == "" })
	inProcess(b, st.api, a.path, 201)
}

// BenchmarkHandlerVAPID: a v2 push with VAPID, the token reused as senders
// do (verified once, then from the cache), and with the cache off (one
// signature check per push). TTL 0 and no client: no storage write.
func BenchmarkHandlerVAPID(b *testing.B) {
	for _, c := range []struct {
		name  string
		cache int
	}{{"cached", DefaultConfig().VAPIDCache}, {"uncached", 0}} {
		b.Run(c.name, func(b *testing.B) {
			s := newServer(b, newStore(b), func(cfg *Config) { cfg.VAPIDCache = c.cache })
			key := newVAPIDKey(b)
			u := subscribe(b, s, "", key.pub)
			inProcess(b, s, u.path, 201, "TTL", "0", "Authorization", key.auth(b, testEndpointURL))
		})
	}
}

// post sends one push over HTTP with client.
func post(b *testing.B, client *http.Client, url string, body []byte) {
	req, _ := http.NewRequest("POST", url, bytes.NewReader(body))
	req.Header.Set("TTL", "600")
	req.Header.Set("Content-Encoding", "aes128gcm")
	resp, err := client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 201 {
		b.Fatalf("status %d", resp.StatusCode)
	}
}

func benchPost(b *testing.B, st *stack, path string, parallel bool) {
	url := "http://" + st.api.Addr() + path
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	defer client.CloseIdleConnections()
	body := bytes.Repeat([]byte{0x5A}, benchBody)
	b.ReportAllocs()
	b.SetBytes(benchBody)
	b.ResetTimer()
	if !parallel {
		for range b.N {
			post(b, client, url, body)
		}
		return
	}
	b.SetParallelism(8)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			post(b, client, url, body)
		}
	})
}

func BenchmarkPostDirect(b *testing.B) {
	for _, parallel := range []bool{false, true} {
		b.Run(map[bool]string{false: "serial", true: "parallel"}[parallel], func(b *testing.B) {
			st := benchStack(b, false, nil)
			a, stop := benchAgent(b, st)
			defer stop()
			benchPost(b, st, a.path, parallel)
			b.StopTimer()
			if d, s := outcomes(st.api); s != 0 {
				b.Fatalf("%d direct, %d stored: the direct path stored", d, s)
			}
		})
	}
}

func BenchmarkPostStored(b *testing.B) {
	for _, parallel := range []bool{false, true} {
		b.Run(map[bool]string{false: "serial", true: "parallel"}[parallel], func(b *testing.B) {
			st := benchStack(b, false, nil)
			a := st.connect(b, "", uuid.NewString(), "")
			a.Close()
			et.Eventually(b, 5*time.Second, "agent gone", func() bool { return st.nodeID(b, a.uaid) == "" })
			benchPost(b, st, a.path, parallel)
		})
	}
}
