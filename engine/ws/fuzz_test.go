package ws

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"testing"
	"unicode/utf8"
)

// Seeds are added split at every byte: the properties below feed an input
// in two pieces, and every split of a valid input is an interesting case.
func addEverySplit(f *testing.F, in []byte) {
	for k := 0; k <= len(in); k++ {
		f.Add(in, uint16(k))
	}
}

// addHalves adds seeds split in their middle.
func addHalves[T string | []byte](f *testing.F, seeds ...T) {
	for _, s := range seeds {
		f.Add([]byte(s), uint16(len(s)/2))
	}
}

func FuzzParseUpgrade(f *testing.F) {
	addEverySplit(f, []byte(firefoxUpgrade))
	addHalves(f,
		minimalUpgrade,
		firefoxUpgrade+string(text("hello after the head")),
		upgradeWith("Sec-WebSocket-Version: 8"),
		upgradeWith("Sec-WebSocket-Key: short"),
		upgradeWith("Connection: close"),
		"GET /__lbheartbeat__ HTTP/1.1\r\nHost: x\r\n\r\n",
		"POST / HTTP/1.1\r\n\r\n",
		"GET / HTTP/1.0\r\n\r\n",
		"GET / HTTP/1.1\r\nX:\r\n y\r\n\r\n",
	)
	f.Fuzz(func(t *testing.T, data []byte, split uint16) {
		in := bytes.Clone(data)
		req, n, err := ParseUpgrade(in)
		if n < 0 || n > len(data) {
			t.Fatalf("n = %d of %d bytes", n, len(data))
		}
		if !bytes.Equal(in, data) {
			t.Fatal("ParseUpgrade modified its input")
		}
		needMore := n == 0 && err == nil
		switch {
		case needMore:
			if len(data) >= MaxUpgradeSize || bytes.Contains(data, headEnd) {
				t.Fatalf("need-more on %d bytes holding a head", len(data))
			}
		case err == nil:
			if !bytes.HasSuffix(data[:n], headEnd) || bytes.Contains(data[:n-1], headEnd) {
				t.Fatalf("n = %d is not the end of the head", n)
			}
		default:
			var ue *UpgradeError
			if !errors.As(err, &ue) {
				t.Fatalf("error %T %v is not an *UpgradeError", err, err)
			}
			checkHTTPResponse(t, ue.AppendResponse(nil), ue.Status)
		}

		// The first piece alone says need-more or gives the same result.
		k := int(split) % (len(data) + 1)
		req1, n1, err1 := ParseUpgrade(data[:k])
		if !(n1 == 0 && err1 == nil) && (req1 != req || n1 != n || err1 != err) {
			t.Fatalf("prefix %d: (%+v, %d, %v), whole: (%+v, %d, %v)", k, req1, n1, err1, req, n, err)
		}
		// The head alone gives the same result as with bytes after it.
		if n > 0 {
			req2, n2, err2 := ParseUpgrade(data[:n])
			if req2 != req || n2 != n || err2 != err {
				t.Fatalf("head alone: (%+v, %d, %v), whole: (%+v, %d, %v)", req2, n2, err2, req, n, err)
			}
		}
		if err == nil && n > 0 {
			if len(req.Key) != 24 || req.Path == "" {
				t.Fatalf("accepted %+v", req)
			}
			resp := checkHTTPResponse(t, AppendUpgradeResponse(nil, &req, req.Protocol()), 101)
			if resp.Header.Get("Sec-WebSocket-Accept") == "" {
				t.Fatal("no accept key")
			}
			// The strings must not alias the input.
			before := req
			for i := range in {
				in[i] = 0
			}
			if req != before {
				t.Fatal("Upgrade aliases the input")
			}
		}
	})
}

func checkHTTPResponse(t *testing.T, b []byte, status int) *http.Response {
	t.Helper()
	resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(b)), nil)
	if err != nil || resp.StatusCode != status {
		t.Fatalf("response %q: %v", b, err)
	}
	return resp
}

// Stream limits small enough for the fuzzer to reach.
const (
	fuzzMaxFrame   = 200
	fuzzMaxMessage = 300
)

func FuzzParseFrame(f *testing.F) {
	ack := text(ackJSON)
	fragmented := concat(
		clientFrame(false, 0, OpText, []byte("frag")),
		clientFrame(true, 0, OpPing, []byte("ping")),
		clientFrame(false, 0, OpContinuation, []byte("ment\xe2\x82")),
		clientFrame(true, 0, OpContinuation, []byte("\xac")),
	)
	closing := clientFrame(true, 0, OpClose, closeBody(1000, "bye"))
	for _, s := range [][]byte{
		ack,
		clientFrame(true, 0, OpPing, []byte("hi")),
		closing,
		fragmented,
		concat(ack, fragmented, clientFrame(true, 0, OpPong, nil), closing),
	} {
		addEverySplit(f, s)
	}
	for _, s := range [][]byte{
		clientFrame(true, 0, OpBinary, make([]byte, fuzzMaxFrame)),
		clientFrame(true, 0, OpBinary, make([]byte, 0x100)),
		concat(clientFrame(false, 0, OpBinary, make([]byte, 150)), clientFrame(true, 0, OpContinuation, make([]byte, 151))),
		clientFrame(true, 4, OpText, []byte("deflated")),
		{0x81, 0x05, 'h', 'e', 'l', 'l', 'o'},
		{0x82, 0xff, 0x80, 0, 0, 0, 0, 0, 0, 0},
		text("bad \xff utf8"),
		clientFrame(true, 0, OpClose, closeBody(1005, "")),
		clientFrame(true, 0, OpClose, []byte{3}),
		clientFrame(true, 0, OpContinuation, []byte("orphan")),
	} {
		f.Add(s, uint16(len(s)/2))
	}
	f.Fuzz(func(t *testing.T, data []byte, split uint16) {
		whole := runStream(t, data, len(data))
		k := int(split) % (len(data) + 1)
		if pieces := runStream(t, data, k); !reflect.DeepEqual(pieces, whole) {
			t.Fatalf("split at %d:\n%v\nwhole:\n%v", k, pieces, whole)
		}
	})
}

// runStream feeds data to ParseFrame and an Assembler as a connection
// would receive it, in two reads split at k, and records what comes out.
func runStream(t *testing.T, data []byte, k int) []string {
	var (
		buf    []byte
		a      Assembler
		events []string
	)
	defer a.Reset()
	feed := func(chunk []byte) (stop bool) {
		buf = append(buf, chunk...)
		for {
			h, p, n, err := ParseFrame(buf, fuzzMaxFrame)
			if n < 0 || n > len(buf) {
				t.Fatalf("n = %d of %d bytes", n, len(buf))
			}
			if err != nil {
				if _, ok := err.(*CloseError); !ok || n != 0 {
					t.Fatalf("error %T %v with n = %d", err, err, n)
				}
				events = append(events, "frame error: "+err.Error())
				return true
			}
			if n == 0 {
				return false
			}
			if int64(len(p)) != h.Length || len(p) > fuzzMaxFrame || n < len(p)+6 ||
				(len(p) > 0 && &p[len(p)-1] != &buf[n-1]) {
				t.Fatalf("payload of %d bytes, header %+v, n = %d", len(p), h, n)
			}
			msg, ok, err := a.Feed(h, p, fuzzMaxMessage)
			if err != nil {
				if _, isClose := err.(*CloseError); !isClose || ok {
					t.Fatalf("error %T %v ok=%v", err, err, ok)
				}
				events = append(events, "message error: "+err.Error())
				return true
			}
			if ok {
				events = append(events, fmt.Sprintf("%v %d %q", msg.Op, msg.Code, msg.Payload))
				checkMessage(t, msg)
				// Writing it back must give a frame gobwas can read.
				readServerFrame(t, AppendFrame(nil, msg.Op, msg.Payload[:min(len(msg.Payload), MaxControlPayload)]))
			}
			a.Release()
			buf = buf[n:]
		}
	}
	if feed(data[:k]) || feed(data[k:]) {
		return events // stopped on an error: what is left is not comparable
	}
	return append(events, fmt.Sprintf("left %d bytes, fragmented %v", len(buf), a.Fragmented()))
}

func checkMessage(t *testing.T, msg Message) {
	t.Helper()
	switch msg.Op {
	case OpText:
		if !utf8.Valid(msg.Payload) || len(msg.Payload) > fuzzMaxMessage {
			t.Fatalf("bad text message %q", msg.Payload)
		}
	case OpBinary:
		if len(msg.Payload) > fuzzMaxMessage {
			t.Fatalf("binary message of %d bytes", len(msg.Payload))
		}
	case OpClose:
		if msg.Code != StatusNoStatusRcvd && !ValidCloseCode(msg.Code) || !utf8.Valid(msg.Payload) {
			t.Fatalf("bad close %d %q", msg.Code, msg.Payload)
		}
	case OpPing, OpPong:
		if len(msg.Payload) > MaxControlPayload {
			t.Fatalf("control payload of %d bytes", len(msg.Payload))
		}
	default:
		t.Fatalf("message with opcode %v", msg.Op)
	}
}
