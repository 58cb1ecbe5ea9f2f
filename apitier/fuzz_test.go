package apitier

import (
	"bufio"
	"bytes"
	"io"
	"regexp"
	"strings"
	"testing"

	"github.com/cloudwego/hertz/pkg/common/test/mock"
	hertzproto "github.com/cloudwego/hertz/pkg/protocol"
	"github.com/cloudwego/hertz/pkg/protocol/http1/req"

	"github.com/autopush-go/autopush/apitier/pushheader"
	"github.com/autopush-go/autopush/storage"
)

// twoReads delivers a in one read and b in the next: a client whose
// header arrives in two TCP segments.
type twoReads struct{ parts [][]byte }

func (r *twoReads) Read(p []byte) (int, error) {
	for len(r.parts) > 0 && len(r.parts[0]) == 0 {
		r.parts = r.parts[1:]
	}
	if len(r.parts) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.parts[0])
	r.parts[0] = r.parts[0][n:]
	return n, nil
}

// readHeader parses a request header block with Hertz's reader, fed in
// two reads split at cut.
func readHeader(raw []byte, cut int) (*hertzproto.RequestHeader, error) {
	cut = min(cut, len(raw))
	zr := mock.ZeroCopyReader{Reader: bufio.NewReaderSize(&twoReads{parts: [][]byte{raw[:cut], raw[cut:]}}, 64<<10)}
	var h hertzproto.RequestHeader
	return &h, req.ReadHeaderWithLimit(&h, zr, maxHeaderBytes)
}

var validTopic = regexp.MustCompile(`^[A-Za-z0-9_-]{1,32}$`)

// FuzzPushHeaders: a push's header lines, arriving in two reads split at
// an arbitrary byte, go through Hertz's header reader and every push
// header rule (TTL, Topic, Urgency, Content-Encoding, Encryption and
// Crypto-Key, and the VAPID Authorization). Nothing panics; the split
// changes nothing (the same block read whole gives the same answer); and
// what is accepted obeys the rules.
func FuzzPushHeaders(f *testing.F) {
	for _, seed := range []string{
		"TTL: 60\r\n",
		"TTL: 60\r\nTTL: 61\r\n",
		"TTL: -0\r\nTopic: \r\n",
		"TTL: 99999999999999999999999\r\nTopic: abc==\r\nUrgency: HIGH\r\n",
		"TTL: 1\r\nContent-Encoding: AES128GCM\r\nCrypto-Key: p256ecdsa=\"BF92==\"\r\n",
		"TTL: 1\r\nContent-Encoding: aesgcm\r\nEncryption: salt=\"foo==\";rs=4096\r\nCrypto-Key: keyid=p256dh;dh=\"abc==\",p256ecdsa=x\r\n",
		"TTL: 1\r\nContent-Encoding: aesgcm\r\nContent-Encoding: aesgcm\r\n",
		"TTL: 1\r\nAuthorization: vapid t=a.b.c, k=BF92\r\n",
		"TTL: 1\r\nAuthorization: WebPush a.b.c\r\nCrypto-Key: p256ecdsa=BF92\r\n",
		"TTL:1\r\nttl: 2\r\n",
	} {
		f.Add([]byte(seed), uint16(7), true)
		f.Add([]byte(seed), uint16(40), false)
	}
	v := newVerifier(DefaultConfig())
	f.Fuzz(func(t *testing.T, lines []byte, cut uint16, hasData bool) {
		raw := append([]byte("POST /wpush/v1/t HTTP/1.1\r\nHost: x\r\n"), lines...)
		raw = append(raw, "\r\n\r\n"...)
		split, err := readHeader(raw, int(cut))
		whole, errWhole := readHeader(raw, len(raw))
		if (err == nil) != (errWhole == nil) {
			t.Fatalf("split read: %v, whole read: %v", err, errWhole)
		}
		if err != nil {
			return
		}
		h, e := pushheader.Parse(split, hasData)
		hw, ew := pushheader.Parse(whole, hasData)
		if (e == nil) != (ew == nil) || e != nil && *e != *ew || h != hw {
			t.Fatalf("split read gave %+v %v, whole %+v %v", h, e, hw, ew)
		}
		v.Verify(string(split.Peek("Authorization")), string(split.Peek("Crypto-Key")), "http://x")
		if e != nil {
			if e.Status != 400 {
				t.Fatalf("header error with status %d", e.Status)
			}
			return
		}
		count := map[string]int{}
		split.VisitAll(func(k, _ []byte) { count[strings.ToLower(string(k))]++ })
		switch {
		case h.TTL < 0 || h.TTL > storage.MaxTTL:
			t.Fatalf("ttl %d", h.TTL)
		case count["ttl"] != 1 || count["topic"] > 1 || count["urgency"] > 1:
			t.Fatalf("accepted repeated singletons %v", count)
		case h.Topic != "" && !validTopic.MatchString(h.Topic):
			t.Fatalf("topic %q", h.Topic)
		case h.Urgency != "" && h.Urgency != "very-low" && h.Urgency != "low" && h.Urgency != "normal" && h.Urgency != "high":
			t.Fatalf("urgency %q", h.Urgency)
		case !hasData && (h.Encoding != "" || h.Encryption != "" || h.CryptoKey != ""):
			t.Fatalf("crypto headers kept without a body: %+v", h)
		case hasData && h.Encoding != pushheader.AES128GCM && h.Encoding != pushheader.AESGCM:
			t.Fatalf("encoding %q", h.Encoding)
		case hasData && count["content-encoding"] != 1:
			t.Fatalf("accepted %d Content-Encoding lines", count["content-encoding"])
		case strings.Contains(h.Encryption+h.CryptoKey, `"`):
			t.Fatalf("quotes kept: %+v", h)
		}
		var size int
		for _, hd := range h.Append(nil) {
			size += len(hd.Name) + len(hd.Value)
		}
		if size > storage.MaxHeaderBytes {
			t.Fatalf("crypto headers of %d bytes kept", size)
		}
		if hasData && !bytes.Equal(bytes.ToLower(split.Peek("Content-Encoding")), []byte(h.Encoding)) {
			t.Fatalf("encoding %q from %q", h.Encoding, split.Peek("Content-Encoding"))
		}
	})
}
