package apitier

import (
	"bytes"
	"context"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cloudwego/hertz/pkg/common/ut"
	"github.com/google/uuid"

	et "github.com/autopush-go/autopush/engine/enginetest"
	"github.com/autopush-go/autopush/internal/errno"
	"github.com/autopush-go/autopush/internal/token"
	"github.com/autopush-go/autopush/storage"
)

func TestTokenErrors(t *testing.T) {
	s := newServer(t, newStore(t), nil)
	u := subscribe(t, s, "", nil)
	v2 := subscribe(t, s, "", newVAPIDKey(t).pub)
	token := strings.TrimPrefix(u.path, "/wpush/v1/")
	cases := []struct{ name, path, msg string }{
		{"garbage", "/wpush/v1/not-a-token", "Invalid token"},
		{"garbage without version", "/wpush/AAAA", "Invalid token"},
		{"v1 token under v2", "/wpush/v2/" + token, "Invalid token"},
		{"v2 token under v1", strings.Replace(v2.path, "/v2/", "/v1/", 1), "Invalid token"},
		{"unknown version", "/wpush/v3/" + token, "Invalid API version"},
		{"another key", "/wpush/v1/" + tokenWithOtherKey(t, u), "Invalid token"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := perform(s, "POST", c.path, nil, hdr("TTL", "60")...)
			if m := wantError(t, r, 404, errno.InvalidEndpoint); m["message"] != c.msg {
				t.Fatalf("message %q, want %q", m["message"], c.msg)
			}
		})
	}
	// The version-less route is v1.
	r := perform(s, "POST", "/wpush/"+token, nil, hdr("TTL", "60")...)
	wantCreated(t, s, r, "60")
}

// tokenWithOtherKey makes u's token under another CRYPTO_KEY.
func tokenWithOtherKey(t *testing.T, u sub) string {
	k, err := token.ParseKeys(token.GenerateKey())
	et.Must(t, err, "keys")
	ep, err := k.MakeEndpoint(testEndpointURL, u.uaid, u.chid, nil)
	et.Must(t, err, "endpoint")
	return ep[strings.LastIndex(ep, "/")+1:]
}

func TestSubscriptionErrors(t *testing.T) {
	s := newServer(t, newStore(t), nil)
	ctx := context.Background()
	u := subscribe(t, s, "", nil)

	// Unknown channel of a known user: 410 errno 106.
	ep, err := s.keys.MakeEndpoint(s.cfg.EndpointURL, u.uaid, uuid.New(), nil)
	et.Must(t, err, "endpoint")
	r := perform(s, "POST", ep[len(s.cfg.EndpointURL):], nil, hdr("TTL", "60")...)
	wantError(t, r, http.StatusGone, errno.InvalidSubscription)

	// A router type no bridge routes (the reference's adm): 410 errno
	// 106; the record stays.
	b := subscribe(t, s, "", nil)
	et.Must(t, s.store.Connect(ctx, storage.User{UAID: b.uaid, RouterType: "adm", ConnectedAt: time.Now().UnixMilli() + 1}), "connect")
	r = perform(s, "POST", b.path, nil, hdr("TTL", "60")...)
	wantError(t, r, http.StatusGone, errno.InvalidSubscription)
	if _, err := s.store.GetUser(ctx, b.uaid); err != nil {
		t.Fatalf("bridged user's record: %v", err)
	}

	// A bridged user on a node without the sender: 503, retry later.
	f := subscribe(t, s, "", nil)
	et.Must(t, s.store.Connect(ctx, storage.User{UAID: f.uaid, RouterType: "fcm", ConnectedAt: time.Now().UnixMilli() + 1}), "connect")
	wantError(t, perform(s, "POST", f.path, nil, hdr("TTL", "60")...), http.StatusServiceUnavailable, errno.RetryBackoff)

	// Unknown user: 410 errno 106, the reference's NoSubscription.
	et.Must(t, s.store.DropUser(ctx, u.uaid), "drop")
	r = perform(s, "POST", u.path, nil, hdr("TTL", "60")...)
	if m := wantError(t, r, http.StatusGone, errno.InvalidSubscription); m["message"] != "UAID not found" {
		t.Fatalf("message %v", m["message"])
	}
}

func TestTTL(t *testing.T) {
	s := newServer(t, newStore(t), nil)
	u := subscribe(t, s, "", nil)
	maxTTL := strconv.Itoa(storage.MaxTTL)
	for _, c := range []struct {
		ttl   string
		errno errno.Code
		echo  string
	}{
		{"", errno.MissingHeader, ""},
		{"abc", errno.InvalidTTL, ""},
		{"1.5", errno.InvalidTTL, ""},
		{"1e3", errno.InvalidTTL, ""},
		{"-", errno.InvalidTTL, ""},
		{"--1", errno.InvalidTTL, ""},
		{"0x10", errno.InvalidTTL, ""},
		{"-1", errno.NegativeTTL, ""},
		{"-99999999999999999999999", errno.NegativeTTL, ""},
		{"0", 0, "0"},
		{"-0", 0, "0"},
		{"+60", 0, "60"},
		{"0060", 0, "60"},
		{maxTTL, 0, maxTTL},
		{strconv.Itoa(storage.MaxTTL + 1), 0, maxTTL},
		{"99999999999999999999999999", 0, maxTTL},
	} {
		t.Run("TTL="+c.ttl, func(t *testing.T) {
			var h []ut.Header
			if c.ttl != "" {
				h = hdr("TTL", c.ttl)
			}
			r := perform(s, "POST", u.path, nil, h...)
			if c.errno != 0 {
				wantError(t, r, 400, c.errno)
				return
			}
			wantCreated(t, s, r, c.echo)
		})
	}
	// The capped TTL is the one stored.
	u = subscribe(t, s, "", nil)
	r := perform(s, "POST", u.path, []byte("x"), hdr("TTL", "999999999", "Content-Encoding", "aes128gcm")...)
	wantCreated(t, s, r, maxTTL)
	for _, m := range stored(t, s, u.uaid) {
		if m.TTL != storage.MaxTTL {
			t.Fatalf("stored TTL %d, want %d", m.TTL, storage.MaxTTL)
		}
	}
}

func TestTopicAndUrgency(t *testing.T) {
	s := newServer(t, newStore(t), nil)
	u := subscribe(t, s, "", nil)
	for _, c := range []struct {
		name, value string
		errno       errno.Code // 0: accepted; -1: 400 errno null
	}{
		{"Topic", "a-test-topic-which-is-just-right", 0},
		{"Topic", "test-topic-which-is-too-long-1234", errno.InvalidTopic},
		{"Topic", "no spaces", errno.InvalidTopic},
		{"Topic", "no/slash", errno.InvalidTopic},
		{"Topic", "===", errno.InvalidTopic},
		{"Topic", "a=b", errno.InvalidTopic},
		{"Topic", "padded==", 0},
		{"Urgency", "very-low", 0},
		{"Urgency", "low", 0},
		{"Urgency", "normal", 0},
		{"Urgency", "HIGH", 0},
		{"Urgency", "urgent", -1},
		{"Urgency", "very low", -1},
	} {
		t.Run(c.name+"="+c.value, func(t *testing.T) {
			r := perform(s, "POST", u.path, nil, hdr("TTL", "60", c.name, c.value)...)
			switch c.errno {
			case 0:
				wantCreated(t, s, r, "60")
			case -1:
				wantError(t, r, 400, errno.None)
			default:
				wantError(t, r, 400, c.errno)
			}
		})
	}
	// Padding does not make another topic: "padded==" was stored as "padded".
	ms := stored(t, s, u.uaid)
	var topics []string
	for _, m := range ms {
		if m.Topic != "" {
			topics = append(topics, m.Topic)
		}
	}
	if strings.Join(topics, ",") != "a-test-topic-which-is-just-right,padded" &&
		strings.Join(topics, ",") != "padded,a-test-topic-which-is-just-right" {
		t.Fatalf("stored topics %v", topics)
	}
}

func TestEncodingRules(t *testing.T) {
	s := newServer(t, newStore(t), nil)
	const ok = errno.Code(0)
	cases := []struct {
		name    string
		headers []string
		errno   errno.Code
		want    map[string]string // stored headers when accepted
	}{
		{"no Content-Encoding", nil, errno.InvalidCryptoKeys, nil},
		{"unknown encoding", []string{"Content-Encoding", "gzip"}, errno.InvalidCryptoKeys, nil},
		{"legacy aesgcm128", []string{"Content-Encoding", "aesgcm128", "Encryption", "salt=abc", "Encryption-Key", "dh=abc"}, errno.InvalidCryptoKeys, nil},
		{"aes128gcm", aes128gcm, ok, map[string]string{"encoding": "aes128gcm"}},
		// Content codings are case-insensitive (RFC 9110 §8.4.1); the
		// client gets the lower-case name.
		{"AES128GCM", []string{"Content-Encoding", "AES128GCM"}, ok, map[string]string{"encoding": "aes128gcm"}},
		{"AesGcm", []string{"Content-Encoding", "AesGcm", "Encryption", "salt=foo", "Crypto-Key", "dh=bar"},
			ok, map[string]string{"encoding": "aesgcm", "encryption": "salt=foo", "crypto_key": "dh=bar"}},
		{"empty Content-Encoding", []string{"Content-Encoding", ""}, errno.InvalidCryptoKeys, nil},
		{"aes128gcm with salt", kv(aes128gcm, "Encryption", "salt=abc"), errno.InvalidCryptoKeys, nil},
		{"aes128gcm with dh", kv(aes128gcm, "Crypto-Key", "dh=abc"), errno.InvalidCryptoKeys, nil},
		{"aes128gcm with a bad Crypto-Key", kv(aes128gcm, "Crypto-Key", "p256ecdsa"), errno.InvalidCryptoKeys, nil},
		{"aes128gcm with VAPID draft key", kv(aes128gcm, "Crypto-Key", `p256ecdsa="BF92zdI_AKcH5Q31_Rr-04bPqOHU=="`),
			ok, map[string]string{"encoding": "aes128gcm", "crypto_key": "p256ecdsa=BF92zdI_AKcH5Q31_Rr-04bPqOHU"}},
		{"aes128gcm keeps other params", kv(aes128gcm, "Encryption", "notsalt=foo", "Crypto-Key", "notdh=bar"),
			ok, map[string]string{"encoding": "aes128gcm", "encryption": "notsalt=foo", "crypto_key": "notdh=bar"}},
		{"aesgcm", []string{"Content-Encoding", "aesgcm", "Encryption", "salt=foo", "Crypto-Key", "dh=bar"},
			ok, map[string]string{"encoding": "aesgcm", "encryption": "salt=foo", "crypto_key": "dh=bar"}},
		{"aesgcm quotes and padding stripped", []string{"Content-Encoding", "aesgcm", "Encryption", `salt="foo=="`,
			"Crypto-Key", `keyid="p256dh";dh="deadbeef==",p256ecdsa="BF92=="`},
			ok, map[string]string{"encoding": "aesgcm", "encryption": "salt=foo", "crypto_key": "keyid=p256dh;dh=deadbeef,p256ecdsa=BF92"}},
		{"aesgcm without Encryption", []string{"Content-Encoding", "aesgcm", "Crypto-Key", "dh=bar"}, errno.InvalidCryptoKeys, nil},
		{"aesgcm without salt", []string{"Content-Encoding", "aesgcm", "Encryption", "rs=4096", "Crypto-Key", "dh=bar"}, errno.InvalidCryptoKeys, nil},
		{"aesgcm with a bad salt", []string{"Content-Encoding", "aesgcm", "Encryption", "salt=a+b/c", "Crypto-Key", "dh=bar"}, errno.InvalidCryptoKeys, nil},
		{"aesgcm with an empty salt", []string{"Content-Encoding", "aesgcm", "Encryption", "salt=", "Crypto-Key", "dh=bar"}, errno.InvalidCryptoKeys, nil},
		{"aesgcm with a bad Encryption", []string{"Content-Encoding", "aesgcm", "Encryption", "salt", "Crypto-Key", "dh=bar"}, errno.InvalidCryptoKeys, nil},
		{"aesgcm without Crypto-Key", []string{"Content-Encoding", "aesgcm", "Encryption", "salt=foo"}, errno.InvalidCryptoKeys, nil},
		{"aesgcm without dh", []string{"Content-Encoding", "aesgcm", "Encryption", "salt=foo", "Crypto-Key", "p256ecdsa=abc"}, errno.InvalidCryptoKeys, nil},
		{"aesgcm with a bad dh", []string{"Content-Encoding", "aesgcm", "Encryption", "salt=foo", "Crypto-Key", "dh=a.b"}, errno.InvalidCryptoKeys, nil},
		{"aesgcm with Encryption-Key", []string{"Content-Encoding", "aesgcm", "Encryption", "salt=foo", "Crypto-Key", "dh=bar", "Encryption-Key", "dh=x"}, errno.InvalidCryptoKeys, nil},
		{"oversized crypto headers", kv(aes128gcm, "Crypto-Key", "p256ecdsa="+strings.Repeat("A", 5000)), errno.InvalidCryptoKeys, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			u := subscribe(t, s, "", nil)
			r := perform(s, "POST", u.path, []byte("encrypted body"), hdr(kv([]string{"TTL", "60"}, c.headers...)...)...)
			if c.errno != ok {
				wantError(t, r, 400, c.errno)
				if ms := stored(t, s, u.uaid); len(ms) != 0 {
					t.Fatalf("a refused push stored %d messages", len(ms))
				}
				return
			}
			wantCreated(t, s, r, "60")
			ms := stored(t, s, u.uaid)
			if len(ms) != 1 {
				t.Fatalf("stored %d messages, want 1", len(ms))
			}
			if got, want := ms[0].Data, base64.RawURLEncoding.EncodeToString([]byte("encrypted body")); got != want {
				t.Fatalf("data %q, want %q (base64url, no padding)", got, want)
			}
			if len(ms[0].Headers) != len(c.want) {
				t.Fatalf("headers %v, want %v", ms[0].Headers, c.want)
			}
			for k, v := range c.want {
				if ms[0].Headers[k] != v {
					t.Fatalf("headers %v, want %v", ms[0].Headers, c.want)
				}
			}
		})
	}
	// No body: no crypto headers are needed, and none are kept.
	u := subscribe(t, s, "", nil)
	r := perform(s, "POST", u.path, nil, hdr("TTL", "60", "Content-Encoding", "gzip", "Encryption", "salt=x")...)
	wantCreated(t, s, r, "60")
	ms := stored(t, s, u.uaid)
	if len(ms) != 1 || ms[0].Data != "" || len(ms[0].Headers) != 0 {
		t.Fatalf("payload-less push stored as %+v", ms)
	}
}

func TestPayloadSizeLimit(t *testing.T) {
	s := newServer(t, newStore(t), nil)
	u := subscribe(t, s, "", nil)
	h := hdr("TTL", "60", "Content-Encoding", "aes128gcm")
	// The reference's limit: 5630 bytes of body.
	wantCreated(t, s, perform(s, "POST", u.path, bytes.Repeat([]byte{0xA5}, DefaultMaxDataBytes), h...), "60")
	ms := stored(t, s, u.uaid)
	if len(ms) != 1 || len(ms[0].Data) != base64.RawURLEncoding.EncodedLen(DefaultMaxDataBytes) {
		t.Fatalf("stored %d messages", len(ms))
	}
	wantError(t, perform(s, "POST", u.path, bytes.Repeat([]byte{1}, DefaultMaxDataBytes+1), h...), 413, errno.PayloadTooLarge)

	// Configurable, and enforced on a real listener whatever the framing.
	small := startServer(t, s.store, func(c *Config) { c.MaxDataBytes = 100 })
	wantCreated(t, small, send(t, small, "POST", u.path, make([]byte, 100), "TTL", "60", "Content-Encoding", "aes128gcm"), "60")
	wantError(t, send(t, small, "POST", u.path, make([]byte, 101), "TTL", "60", "Content-Encoding", "aes128gcm"), 413, errno.PayloadTooLarge)
	wantError(t, send(t, small, "POST", u.path, make([]byte, 1<<20), "TTL", "60", "Content-Encoding", "aes128gcm"), 413, errno.PayloadTooLarge)
	// Chunked (a body of unknown length is sent without Content-Length).
	req, _ := http.NewRequest("POST", "http://"+small.Addr()+u.path, struct{ *bytes.Reader }{bytes.NewReader(make([]byte, 500))})
	req.Header.Set("TTL", "60")
	req.Header.Set("Content-Encoding", "aes128gcm")
	resp, err := http.DefaultClient.Do(req)
	et.Must(t, err, "chunked post")
	resp.Body.Close()
	if resp.StatusCode != 413 {
		t.Fatalf("chunked oversized body: %d, want 413", resp.StatusCode)
	}
	if ms := stored(t, s, u.uaid); len(ms) != 2 {
		t.Fatalf("stored %d messages, want 2", len(ms))
	}
}

func TestTTLZeroDroppedWhenOffline(t *testing.T) {
	s := newServer(t, newStore(t), nil)
	u := subscribe(t, s, "", nil)
	wantCreated(t, s, perform(s, "POST", u.path, []byte("x"), hdr("TTL", "0", "Content-Encoding", "aes128gcm")...), "0")
	if ms := stored(t, s, u.uaid); len(ms) != 0 {
		t.Fatalf("TTL 0 without a client stored %d messages", len(ms))
	}
}

// TestTopicReplacement: two pushes with one topic while the client is
// away leave only the newer stored, and the older one's id cannot delete
// it.
func TestTopicReplacement(t *testing.T) {
	s := newServer(t, newStore(t), nil)
	u := subscribe(t, s, "", nil)
	h := hdr("TTL", "600", "Topic", "new_mail", "Content-Encoding", "aes128gcm")
	first := wantCreated(t, s, perform(s, "POST", u.path, []byte("one unread"), h...), "600")
	second := wantCreated(t, s, perform(s, "POST", u.path, []byte("two unread"), h...), "600")
	if first == second {
		t.Fatal("the two pushes got the same message id")
	}
	ms := stored(t, s, u.uaid)
	if len(ms) != 1 || ms[0].Version != second || ms[0].Data != base64.RawURLEncoding.EncodeToString([]byte("two unread")) {
		t.Fatalf("stored %+v, want only the second push", ms)
	}
	// Cancelling the replaced version leaves the newer one.
	if r := perform(s, "DELETE", "/m/"+first, nil); r.code != http.StatusNoContent {
		t.Fatalf("DELETE old version: %d", r.code)
	}
	if ms := stored(t, s, u.uaid); len(ms) != 1 || ms[0].Version != second {
		t.Fatalf("after deleting the old version: %+v", ms)
	}
	if r := perform(s, "DELETE", "/m/"+second, nil); r.code != http.StatusNoContent {
		t.Fatalf("DELETE: %d", r.code)
	}
	if ms := stored(t, s, u.uaid); len(ms) != 0 {
		t.Fatalf("after deleting the current version: %+v", ms)
	}
}

func TestDeleteMessage(t *testing.T) {
	s := newServer(t, newStore(t), nil)
	u := subscribe(t, s, "", nil)
	id := wantCreated(t, s, perform(s, "POST", u.path, []byte("x"), hdr("TTL", "60", "Content-Encoding", "aes128gcm")...), "60")
	other := wantCreated(t, s, perform(s, "POST", u.path, nil, hdr("TTL", "60")...), "60")
	if ms := stored(t, s, u.uaid); len(ms) != 2 {
		t.Fatalf("stored %d", len(ms))
	}
	r := perform(s, "DELETE", "/m/"+id, nil)
	if r.code != http.StatusNoContent || len(r.body) != 0 {
		t.Fatalf("DELETE: %d %s", r.code, r.body)
	}
	if ms := stored(t, s, u.uaid); len(ms) != 1 || ms[0].Version != other {
		t.Fatalf("after DELETE: %+v", ms)
	}
	// Again: nothing left to delete is still 204.
	if r := perform(s, "DELETE", "/m/"+id, nil); r.code != http.StatusNoContent {
		t.Fatalf("second DELETE: %d", r.code)
	}
	// Undecryptable ids: 404 errno 102, nothing deleted.
	for _, bad := range []string{"garbage", id[:len(id)-4] + "AAAA", tokenWithOtherKey(t, u)} {
		wantError(t, perform(s, "DELETE", "/m/"+bad, nil), 404, errno.InvalidEndpoint)
	}
	if ms := stored(t, s, u.uaid); len(ms) != 1 {
		t.Fatalf("a refused DELETE deleted: %+v", ms)
	}
	// A reference (autopush-rs) id, "02:{uaid}:{chid}:{ms}", is read too
	// (it names a message migrated from the reference, none here).
	ms := stored(t, s, u.uaid)
	refID, err := s.keys.Encrypt([]byte("02:" + strings.ReplaceAll(u.uaid.String(), "-", "") + ":" +
		strings.ReplaceAll(u.chid.String(), "-", "") + ":" + strconv.FormatUint(ms[0].SortKey/1e6, 10)))
	et.Must(t, err, "encrypt")
	if r := perform(s, "DELETE", "/m/"+refID, nil); r.code != http.StatusNoContent {
		t.Fatalf("DELETE reference id: %d %s", r.code, r.body)
	}
}

// TestSingletonHeaders: TTL, Topic, Urgency and Content-Encoding sent
// twice are refused (the reference takes the first); an empty Topic or
// Urgency is refused as the OpenAPI patterns refuse them.
func TestSingletonHeaders(t *testing.T) {
	s := newServer(t, newStore(t), nil)
	for _, c := range []struct {
		name    string
		headers []string
		body    bool
		status  int
		errno   errno.Code
	}{
		{"TTL twice", []string{"TTL", "60", "TTL", "60"}, false, 400, errno.InvalidTTL},
		{"TTL twice, differing", []string{"TTL", "0", "TTL", "600"}, false, 400, errno.InvalidTTL},
		{"Topic twice", []string{"TTL", "60", "Topic", "a", "Topic", "b"}, false, 400, errno.InvalidTopic},
		{"empty Topic", []string{"TTL", "60", "Topic", ""}, false, 400, errno.InvalidTopic},
		{"Urgency twice", []string{"TTL", "60", "Urgency", "low", "Urgency", "low"}, false, 400, errno.None},
		{"empty Urgency", []string{"TTL", "60", "Urgency", ""}, false, 400, errno.None},
		{"Content-Encoding twice", []string{"TTL", "60", "Content-Encoding", "aes128gcm", "Content-Encoding", "aes128gcm"}, true, 400, errno.InvalidCryptoKeys},
		{"Content-Encoding twice without a body", []string{"TTL", "60", "Content-Encoding", "aes128gcm", "Content-Encoding", "x"}, false, 201, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			u := subscribe(t, s, "", nil)
			var body []byte
			if c.body {
				body = []byte("encrypted body")
			}
			var h []ut.Header
			for i := 0; i+1 < len(c.headers); i += 2 {
				h = append(h, ut.Header{Key: c.headers[i], Value: c.headers[i+1]})
			}
			r := perform(s, "POST", u.path, body, h...)
			if c.status == 201 {
				wantCreated(t, s, r, "60")
				return
			}
			wantError(t, r, c.status, c.errno)
			if ms := stored(t, s, u.uaid); len(ms) != 0 {
				t.Fatalf("a refused push stored %d messages", len(ms))
			}
		})
	}
}
