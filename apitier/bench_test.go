package apitier_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/gobwas/ws"

	"github.com/autopush-go/autopush/apitier"
	"github.com/autopush-go/autopush/stack"
	"github.com/autopush-go/autopush/stack/stacktest"
)

// Benchmarks of a push through the API tier (docs/benchmarks.md):
//
//   - BenchmarkHandler*: the handler in process, no HTTP on the
//     application server's side: a reused Hertz RequestContext goes
//     through the router, so allocs/op are this tier's per request (plus,
//     for Direct, the node call and the engine's handling of it, in the
//     same process).
//   - BenchmarkPost*: real HTTP over 127.0.0.1 with a keep-alive client,
//     sequential and parallel; allocs/op include the client's.
//
// Storage: the stored path uses the embedded store with fsync (as
// deployed) and, where named NoSync, without (to show the tier's own cost).
//
// Except BenchmarkHandlerVAPID (handler_bench_test.go, no connection
// node), they run the tier behind a whole stack (stack/stacktest), so this
// file is an external test package: stack imports apitier.

// benchAgent is a connected user agent that acks every notification in
// the background, so direct delivery never finds it busy.
func benchAgent(b *testing.B, st *stacktest.Stack) (*stacktest.Subscriber, func()) {
	a := st.Subscribe(b, "")
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

// benchStack runs a stack whose connection node never answers busy, on a
// store without fsync when noSync.
func benchStack(b *testing.B, noSync bool) *stacktest.Stack {
	return stacktest.StartWith(b, stacktest.Options{NoSync: noSync, Config: func(c *stack.Config) { c.Engine.MaxUnacked = 1 << 20 }})
}

// path is an endpoint's path, as the handlers route it.
func path(b *testing.B, endpoint string) string {
	u, err := url.Parse(endpoint)
	if err != nil {
		b.Fatal(err)
	}
	return u.Path
}

func BenchmarkHandlerDirect(b *testing.B) {
	st := benchStack(b, false)
	a, stop := benchAgent(b, st)
	defer stop()
	apitier.InProcess(b, st.API(), path(b, a.Endpoint), 201)
	b.StopTimer()
	if d, s := apitier.Outcomes(st.API()); s != 0 {
		b.Fatalf("%d direct, %d stored: the direct path stored", d, s)
	}
}

func BenchmarkHandlerStored(b *testing.B) {
	st := benchStack(b, false)
	apitier.InProcess(b, st.API(), path(b, st.Left(b).Endpoint), 201)
}

func BenchmarkHandlerStoredNoSync(b *testing.B) {
	st := benchStack(b, true)
	apitier.InProcess(b, st.API(), path(b, st.Left(b).Endpoint), 201)
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

func benchPost(b *testing.B, endpoint string, parallel bool) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	defer client.CloseIdleConnections()
	body := bytes.Repeat([]byte{0x5A}, apitier.BenchBody)
	b.ReportAllocs()
	b.SetBytes(apitier.BenchBody)
	b.ResetTimer()
	if !parallel {
		for range b.N {
			post(b, client, endpoint, body)
		}
		return
	}
	b.SetParallelism(8)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			post(b, client, endpoint, body)
		}
	})
}

func BenchmarkPostDirect(b *testing.B) {
	for _, parallel := range []bool{false, true} {
		b.Run(map[bool]string{false: "serial", true: "parallel"}[parallel], func(b *testing.B) {
			st := benchStack(b, false)
			a, stop := benchAgent(b, st)
			defer stop()
			benchPost(b, a.Endpoint, parallel)
			b.StopTimer()
			if d, s := apitier.Outcomes(st.API()); s != 0 {
				b.Fatalf("%d direct, %d stored: the direct path stored", d, s)
			}
		})
	}
}

func BenchmarkPostStored(b *testing.B) {
	for _, parallel := range []bool{false, true} {
		b.Run(map[bool]string{false: "serial", true: "parallel"}[parallel], func(b *testing.B) {
			st := benchStack(b, false)
			benchPost(b, st.Left(b).Endpoint, parallel)
		})
	}
}
