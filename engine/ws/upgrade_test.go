package ws

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

func TestParseUpgradeFirefox(t *testing.T) {
	buf := []byte(firefoxUpgrade + "\x81\x85trailing frame bytes")
	req, n, err := ParseUpgrade(buf)
	if err != nil {
		t.Fatal(err)
	}
	if n != len(firefoxUpgrade) {
		t.Fatalf("n = %d, want %d", n, len(firefoxUpgrade))
	}
	want := Upgrade{
		Path:       "/",
		Host:       "127.0.0.1:8080",
		Origin:     "null",
		UserAgent:  "Mozilla/5.0 (X11; Linux x86_64; rv:153.0) Gecko/20100101 Firefox/153.0",
		Key:        "dGhlIHNhbXBsZSBub25jZQ==",
		OffersPush: true,
	}
	if req != want {
		t.Fatalf("req = %+v\nwant %+v", req, want)
	}
	if req.Protocol() != PushProtocol {
		t.Fatalf("Protocol() = %q", req.Protocol())
	}
	// The strings are copies: clobbering the input must not change them.
	for i := range buf {
		buf[i] = 'X'
	}
	if req != want {
		t.Fatalf("req aliases the input: %+v", req)
	}
}

func TestParseUpgradeNeedMore(t *testing.T) {
	for k := range len(firefoxUpgrade) {
		req, n, err := ParseUpgrade([]byte(firefoxUpgrade[:k]))
		if n != 0 || err != nil || req != (Upgrade{}) {
			t.Fatalf("prefix %d: n=%d err=%v req=%+v, want need-more", k, n, err, req)
		}
	}
}

func TestParseUpgradeOK(t *testing.T) {
	tests := []struct {
		name string
		req  string
		want Upgrade
	}{
		{"minimal, no Host nor Origin", minimalUpgrade,
			Upgrade{Path: "/ws", Key: "dGhlIHNhbXBsZSBub25jZQ=="}},
		{"case-insensitive names and tokens",
			"GET /x?y=1 HTTP/1.1\r\nUPGRADE: WebSocket\r\nconnection: UPGRADE\r\nsec-websocket-version: 13\r\nSEC-WEBSOCKET-KEY:dGhlIHNhbXBsZSBub25jZQ==\t\r\n\r\n",
			Upgrade{Path: "/x?y=1", Key: "dGhlIHNhbXBsZSBub25jZQ=="}},
		{"protocol in a list", upgradeWith("Sec-WebSocket-Protocol: chat , push-notification"),
			Upgrade{Path: "/ws", Key: "dGhlIHNhbXBsZSBub25jZQ==", OffersPush: true}},
		{"protocol over several lines",
			strings.Replace(minimalUpgrade, "\r\n\r\n", "\r\nSec-WebSocket-Protocol: chat\r\nSec-WebSocket-Protocol: x, push-notification\r\n\r\n", 1),
			Upgrade{Path: "/ws", Key: "dGhlIHNhbXBsZSBub25jZQ==", OffersPush: true}},
		{"protocol is case-sensitive", upgradeWith("Sec-WebSocket-Protocol: Push-Notification"),
			Upgrade{Path: "/ws", Key: "dGhlIHNhbXBsZSBub25jZQ=="}},
		{"Connection list and repeated", upgradeWith("Connection: keep-alive", "Connection: foo,upgrade"),
			Upgrade{Path: "/ws", Key: "dGhlIHNhbXBsZSBub25jZQ=="}},
		{"odd Host and Origin kept as sent", strings.Replace(minimalUpgrade, "\r\n\r\n", "\r\nHost: \xffodd host\r\nOrigin: moz-extension://abc\r\nHost: second\r\n\r\n", 1),
			Upgrade{Path: "/ws", Host: "\xffodd host", Origin: "moz-extension://abc", Key: "dGhlIHNhbXBsZSBub25jZQ=="}},
		{"empty values", upgradeWith("Host:", "Origin: ", "User-Agent:\t"),
			Upgrade{Path: "/ws", Key: "dGhlIHNhbXBsZSBub25jZQ=="}},
		{"Content-Length 0", upgradeWith("Content-Length: 0"),
			Upgrade{Path: "/ws", Key: "dGhlIHNhbXBsZSBub25jZQ=="}},
		{"HTTP/1.2", strings.Replace(minimalUpgrade, "HTTP/1.1", "HTTP/1.2", 1),
			Upgrade{Path: "/ws", Key: "dGhlIHNhbXBsZSBub25jZQ=="}},
		{"absolute-form target", strings.Replace(minimalUpgrade, "/ws", "http://h/ws", 1),
			Upgrade{Path: "http://h/ws", Key: "dGhlIHNhbXBsZSBub25jZQ=="}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, n, err := ParseUpgrade([]byte(tt.req))
			if err != nil || n != len(tt.req) {
				t.Fatalf("n=%d err=%v", n, err)
			}
			if req != tt.want {
				t.Fatalf("req = %+v\nwant %+v", req, tt.want)
			}
		})
	}
}

func TestParseUpgradeErrors(t *testing.T) {
	big := "GET / HTTP/1.1\r\nX: " + strings.Repeat("a", MaxUpgradeSize)
	tests := []struct {
		name   string
		req    string
		want   *UpgradeError
		status int
	}{
		{"too large, no end yet", big, ErrUpgradeTooLarge, 431},
		{"too large, end after limit", big + "\r\n\r\n", ErrUpgradeTooLarge, 431},
		{"POST", strings.Replace(minimalUpgrade, "GET", "POST", 1), ErrMethodNotAllowed, 405},
		{"lowercase get", strings.Replace(minimalUpgrade, "GET", "get", 1), ErrMethodNotAllowed, 405},
		{"method not a token", strings.Replace(minimalUpgrade, "GET", "G(T", 1), ErrMalformedRequest, 400},
		{"HTTP/1.0", strings.Replace(minimalUpgrade, "HTTP/1.1", "HTTP/1.0", 1), ErrHTTP10, 400},
		{"HTTP/2.0", strings.Replace(minimalUpgrade, "HTTP/1.1", "HTTP/2.0", 1), ErrHTTPVersion, 505},
		{"bad version", strings.Replace(minimalUpgrade, "HTTP/1.1", "HTTP/1.10", 1), ErrMalformedRequest, 400},
		{"lowercase version", strings.Replace(minimalUpgrade, "HTTP/1.1", "http/1.1", 1), ErrMalformedRequest, 400},
		{"no version", "GET /\r\n\r\n", ErrMalformedRequest, 400},
		{"empty target", strings.Replace(minimalUpgrade, "/ws", "", 1), ErrMalformedRequest, 400},
		{"control char in target", strings.Replace(minimalUpgrade, "/ws", "/w\x01s", 1), ErrMalformedRequest, 400},
		{"blank head", "\r\n\r\n", ErrMalformedRequest, 400},
		{"space before colon", upgradeWith("Host : x"), ErrMalformedRequest, 400},
		{"obs-fold", strings.Replace(minimalUpgrade, "Upgrade: websocket\r\n", "Upgrade:\r\n websocket\r\n", 1), ErrMalformedRequest, 400},
		{"no colon", upgradeWith("Nonsense"), ErrMalformedRequest, 400},
		{"empty name", upgradeWith(": x"), ErrMalformedRequest, 400},
		{"bare LF", strings.Replace(minimalUpgrade, "Connection: Upgrade\r\n", "Connection: Upgrade\nX: y\r\n", 1), ErrMalformedRequest, 400},
		{"NUL in value", upgradeWith("User-Agent: a\x00b"), ErrMalformedRequest, 400},
		{"Transfer-Encoding", upgradeWith("Transfer-Encoding: chunked"), ErrRequestBody, 400},
		{"Content-Length", upgradeWith("Content-Length: 5"), ErrRequestBody, 400},
		{"no Upgrade", upgradeWith("Upgrade:"), ErrNotWebSocket, 426},
		{"Upgrade h2c", upgradeWith("Upgrade: h2c"), ErrNotWebSocket, 426},
		{"no Connection", upgradeWith("Connection:"), ErrConnectionHeader, 400},
		{"Connection keep-alive", upgradeWith("Connection: keep-alive"), ErrConnectionHeader, 400},
		{"Connection upgrade as substring", upgradeWith("Connection: upgrades"), ErrConnectionHeader, 400},
		{"no version header", upgradeWith("Sec-WebSocket-Version:"), ErrMissingVersion, 400},
		{"version 8", upgradeWith("Sec-WebSocket-Version: 8"), ErrUnsupportedVersion, 426},
		{"version list", upgradeWith("Sec-WebSocket-Version: 13, 8"), ErrUnsupportedVersion, 426},
		{"version twice", strings.Replace(minimalUpgrade, "\r\n\r\n", "\r\nSec-WebSocket-Version: 13\r\n\r\n", 1), ErrDuplicateField, 400},
		{"no key", upgradeWith("Sec-WebSocket-Key:"), ErrBadKey, 400},
		{"short key", upgradeWith("Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ="), ErrBadKey, 400},
		{"key not base64", upgradeWith("Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZ!=="), ErrBadKey, 400},
		{"key of 18 bytes", upgradeWith("Sec-WebSocket-Key: AAAAAAAAAAAAAAAAAAAAAAAA"), ErrBadKey, 400},
		{"key twice", strings.Replace(minimalUpgrade, "\r\n\r\n", "\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n", 1), ErrDuplicateField, 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, n, err := ParseUpgrade([]byte(tt.req))
			if err != tt.want {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			var ue *UpgradeError
			if !errors.As(err, &ue) || ue.Status != tt.status {
				t.Fatalf("status: %v, want %d", err, tt.status)
			}
			if tt.want == ErrUpgradeTooLarge {
				if n != 0 {
					t.Fatalf("n = %d, want 0", n)
				}
			} else if n != strings.Index(tt.req, "\r\n\r\n")+4 {
				t.Fatalf("n = %d, want head length", n)
			}
			resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(ue.AppendResponse(nil))), nil)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tt.status || !resp.Close {
				t.Fatalf("response status %d close %v", resp.StatusCode, resp.Close)
			}
			switch tt.status {
			case 405:
				if resp.Header.Get("Allow") != "GET" {
					t.Fatalf("405 without Allow: %v", resp.Header)
				}
			case 426:
				if resp.Header.Get("Sec-WebSocket-Version") != "13" || resp.Header.Get("Upgrade") != "websocket" {
					t.Fatalf("426 headers: %v", resp.Header)
				}
			}
		})
	}
}

// A plain GET (a health check) is refused as ErrNotWebSocket but its path
// is available for routing.
func TestParseUpgradePlainGET(t *testing.T) {
	in := "GET /__lbheartbeat__ HTTP/1.1\r\nHost: node\r\nUser-Agent: ELB-HealthChecker/2.0\r\n\r\n"
	req, n, err := ParseUpgrade([]byte(in))
	if err != ErrNotWebSocket || n != len(in) {
		t.Fatalf("n=%d err=%v", n, err)
	}
	if req.Path != "/__lbheartbeat__" || req.Host != "node" || req.UserAgent != "ELB-HealthChecker/2.0" {
		t.Fatalf("req = %+v", req)
	}
}

// RFC 6455 §1.3's worked example.
func TestAcceptKey(t *testing.T) {
	got := string(AppendAccept(nil, "dGhlIHNhbXBsZSBub25jZQ=="))
	if got != "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" {
		t.Fatalf("accept = %q", got)
	}
	// An oversized key takes the heap path and still hashes key+GUID.
	long := strings.Repeat("k", 100)
	if a, b := AppendAccept(nil, long), AppendAccept(nil, long); !bytes.Equal(a, b) || len(a) != 28 {
		t.Fatalf("long key accept %q", a)
	}
}

func TestAppendUpgradeResponse(t *testing.T) {
	req, _, err := ParseUpgrade([]byte(firefoxUpgrade))
	if err != nil {
		t.Fatal(err)
	}
	for _, proto := range []string{req.Protocol(), ""} {
		out := AppendUpgradeResponse([]byte("prefix"), &req, proto)
		if !bytes.HasPrefix(out, []byte("prefixHTTP/1.1 101 Switching Protocols\r\n")) {
			t.Fatalf("response %q", out)
		}
		resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(out[6:])), nil)
		if err != nil {
			t.Fatal(err)
		}
		h := resp.Header
		if resp.StatusCode != 101 || h.Get("Upgrade") != "websocket" || h.Get("Connection") != "Upgrade" ||
			h.Get("Sec-WebSocket-Accept") != "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" ||
			h.Get("Sec-WebSocket-Protocol") != proto || h.Get("Sec-WebSocket-Extensions") != "" {
			t.Fatalf("proto %q: %d %v", proto, resp.StatusCode, h)
		}
	}
}

func TestAppendHTTPResponse(t *testing.T) {
	out := AppendHTTPResponse(nil, 503, "node full\n", "Retry-After", "30", "X-Dangling")
	resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(out)), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 503 || resp.Status != "503 Service Unavailable" || !resp.Close ||
		resp.Header.Get("Retry-After") != "30" || resp.Header.Get("X-Dangling") != "" || string(body) != "node full\n" {
		t.Fatalf("%s %v %q", resp.Status, resp.Header, body)
	}
	out = AppendHTTPResponse(nil, 299, "")
	resp, err = http.ReadResponse(bufio.NewReader(bytes.NewReader(out)), nil)
	if err != nil || resp.StatusCode != 299 || resp.ContentLength != 0 {
		t.Fatalf("%q: %v", out, err)
	}
}
