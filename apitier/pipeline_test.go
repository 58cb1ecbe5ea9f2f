package apitier

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/autopush-go/autopush/apitier/apitiertest"
)

// HTTP/1.1 pipelining on one raw connection: the requests are written
// at once, ahead of their answers, so the node holds the next request's
// bytes while it reads a body. Each body must be read to its end and not
// a byte further, and every request answered, in order. Pushes carry
// distinct bodies, and each answer's Location must name the message
// stored with its own request's body.

// piped is one request of a pipeline: its bytes, and for a push the
// body it carries (nil for another request).
type piped struct {
	raw  string
	body []byte
}

// pipedPush is a push of body to path, with a Content-Length or chunked
// (in chunks of up to 1,000 bytes, so a body spans several).
func pipedPush(path string, body []byte, chunked bool) piped {
	if !chunked {
		return piped{pushHead(path, "Content-Length: "+strconv.Itoa(len(body))+"\r\n\r\n") + string(body), body}
	}
	var b strings.Builder
	b.WriteString(pushHead(path, "Transfer-Encoding: chunked\r\n\r\n"))
	for rest := body; len(rest) > 0; {
		n := min(len(rest), 1000)
		fmt.Fprintf(&b, "%x\r\n%s\r\n", n, rest[:n])
		rest = rest[n:]
	}
	b.WriteString("0\r\n\r\n")
	return piped{b.String(), body}
}

// pipedBody is the i-th body of a pipeline: its number, then filler up
// to size bytes (at least the number's).
func pipedBody(conn, i, size int) []byte {
	b := fmt.Appendf(nil, "%d.%d.", conn, i)
	for len(b) < size {
		b = append(b, byte('a'+(len(b)+i)%26))
	}
	return b
}

// pipelineSizes are body sizes around Hertz's 8 KiB read-ahead and the
// 12,288-byte max-data-bytes the pipeline tests run with.
var pipelineSizes = []int{1, 7, 100, 4095, 8191, 8192, 8193, 9000, 12288, 0, 5630}

// pipeline makes n requests to path: pushes of varied sizes, a fifth of
// them chunked, with a GET /status every seventh.
func pipeline(path string, conn, n int) []piped {
	reqs := make([]piped, 0, n)
	for i := range n {
		if i%7 == 6 {
			reqs = append(reqs, piped{raw: "GET /status HTTP/1.1\r\nHost: x\r\n\r\n"})
			continue
		}
		size := pipelineSizes[(i+conn)%len(pipelineSizes)]
		if size == 0 {
			size = len(pipedBody(conn, i, 0))
		}
		reqs = append(reqs, pipedPush(path, pipedBody(conn, i, size), i%5 == 4))
	}
	return reqs
}

// checkAnswers reads one answer per request of reqs from c, in order,
// and returns the message ids of the pushes' answers (by request index).
func checkAnswers(t testing.TB, s *Server, c *apitiertest.Raw, reqs []piped) map[int]string {
	t.Helper()
	ids := map[int]string{}
	for i, r := range reqs {
		a := c.Answer()
		if r.body == nil {
			if a.Status != http.StatusOK || !bytes.Contains(a.Body, []byte(`"status":"ok"`)) {
				t.Fatalf("answer %d of %d (GET /status): %d %s", i+1, len(reqs), a.Status, a.Body)
			}
			continue
		}
		if a.Status != http.StatusCreated {
			t.Fatalf("answer %d of %d (a push of %d bytes): %d %s", i+1, len(reqs), len(r.body), a.Status, a.Body)
		}
		ids[i] = apitiertest.WantCreated(t, a, s.cfg.EndpointURL, "60")
	}
	return ids
}

// checkStored checks that each push's answer names the message stored
// with its body.
func checkStored(t testing.TB, s *Server, u sub, reqs []piped, ids map[int]string) {
	t.Helper()
	data := map[string]string{}
	for _, m := range stored(t, s, u.uaid) {
		data[m.Version] = m.Data
	}
	if len(data) != len(ids) {
		t.Fatalf("%d messages stored, want %d", len(data), len(ids))
	}
	for i, id := range ids {
		got, ok := data[id]
		if !ok {
			t.Fatalf("request %d: message %s not stored", i, id)
		}
		if want := base64.RawURLEncoding.EncodeToString(reqs[i].body); got != want {
			t.Fatalf("request %d: stored another body (%d base64 characters, want %d)", i, len(got), len(want))
		}
	}
}

func pipelineServer(t *testing.T) *Server {
	return startServer(t, newStore(t), func(c *Config) { c.MaxDataBytes = MaxMaxDataBytes })
}

// TestPipelinedPushes: 2 to 50 requests written at once on one
// connection are all answered, in order, each push stored with its own
// body.
func TestPipelinedPushes(t *testing.T) {
	s := pipelineServer(t)
	for _, n := range []int{2, 3, 8, 21, 50} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			u := subscribe(t, s, "", nil)
			reqs := pipeline(u.path, n, n)
			var all strings.Builder
			for _, r := range reqs {
				all.WriteString(r.raw)
			}
			c := apitiertest.Dial(t, s.Addr())
			c.Write(all.String())
			checkStored(t, s, u, reqs, checkAnswers(t, s, c, reqs))
		})
	}
}

// TestEarlyNextRequest: the next request's bytes come before the answer
// to the one before is read, in pieces that cut the body, the chunk
// framing and the next header.
func TestEarlyNextRequest(t *testing.T) {
	s := pipelineServer(t)
	u := subscribe(t, s, "", nil)
	reqs := []piped{
		pipedPush(u.path, pipedBody(0, 0, 9000), false),
		pipedPush(u.path, pipedBody(0, 1, 2500), true),
		pipedPush(u.path, pipedBody(0, 2, 40), false),
		{raw: "GET /status HTTP/1.1\r\nHost: x\r\n\r\n"},
	}
	c := apitiertest.Dial(t, s.Addr())
	ids := map[int]string{}
	for i, r := range reqs {
		// This request's last bytes go with the next one's first.
		head := r.raw[:len(r.raw)-3]
		if i == 0 {
			c.Write(head)
		}
		next := ""
		if i+1 < len(reqs) {
			next = reqs[i+1].raw[:len(reqs[i+1].raw)-3]
			next = next[:len(next)/2]
		}
		c.Write(r.raw[len(head):] + next)
		got := checkAnswers(t, s, c, reqs[i:i+1])
		if id, ok := got[0]; ok {
			ids[i] = id
		}
		if i+1 < len(reqs) {
			// The rest of the next request's head.
			c.Write(reqs[i+1].raw[len(next) : len(reqs[i+1].raw)-3])
		}
	}
	checkStored(t, s, u, reqs, ids)
}

// TestPipelinedThousand: 1,000 requests pipelined over 50 connections at
// once (20 each), each answered correctly and none lost.
func TestPipelinedThousand(t *testing.T) {
	s := pipelineServer(t)
	const conns, each = 50, 20
	subs := make([]sub, conns)
	reqs := make([][]piped, conns)
	for i := range subs {
		subs[i] = subscribe(t, s, "", nil)
		reqs[i] = pipeline(subs[i].path, i, each)
	}
	ids := make([]map[int]string, conns)
	t.Run("connections", func(t *testing.T) {
		for i := range conns {
			t.Run(strconv.Itoa(i), func(t *testing.T) {
				t.Parallel()
				var all strings.Builder
				for _, r := range reqs[i] {
					all.WriteString(r.raw)
				}
				c := apitiertest.Dial(t, s.Addr())
				c.Write(all.String())
				ids[i] = checkAnswers(t, s, c, reqs[i])
			})
		}
	})
	if t.Failed() {
		return
	}
	answered := 0
	for i := range conns {
		checkStored(t, s, subs[i], reqs[i], ids[i])
		answered += len(reqs[i])
	}
	if answered != conns*each {
		t.Fatalf("%d requests answered, want %d", answered, conns*each)
	}
}
