package nodeapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/autopush-go/autopush/internal/protocol"
)

const testChid = "5a7c26a2-44b8-4b8c-8c4a-7e1c1d29a0b1"

// testNotification is a push as the API tier hands it on: an aesgcm
// payload (the legacy encoding, which needs all three crypto headers), a
// topic and a sort key.
func testNotification() *protocol.Notification {
	n := &protocol.Notification{ChannelID: testChid, Version: "gAAAAABmX2Z0aWxlX3ZlcnNpb24tbm9kZWFwaS1ib2R5LXRlc3Q"}
	n.TTL, n.Timestamp, n.SortKey, n.Topic = 3600, 1718000123, 1718000123456789012, "weather"
	n.Data = "yqPbaQ8RcK2uI3tQ7mZ0vX9aB4cD6eF8gH0iJ2kL4mN6oP8qR0sT2uV4wX6yZ8aB0cD2eF4gH6iJ8kL0mN2oP4qR6sT8u"
	n.Headers = []protocol.Header{
		{Name: "encoding", Value: "aesgcm"},
		{Name: "encryption", Value: "salt=lngarbyKfMoi9Z75xYXmkg"},
		{Name: "crypto_key", Value: "dh=BNoRDbb84JGm8g5Z5CFxurSqsXWJ11ItfXEWYVLE85Y7CYkDjXsIEc4aqxYaQ1G8BqkXCJ6DPpDrWtdWj_mugHU"},
	}
	return n
}

// textAlphabet holds what string escaping has to get right: quotes,
// backslashes, control characters, multi-byte runes, U+2028 and U+2029.
var textAlphabet = []rune("aZ0-_=\"\\/\n\t\x00\x1f\x7fé€😀\u2028\u2029\ufffd<>& ")

// randText returns up to 11 runes of textAlphabet (valid UTF-8, as every
// string a client or the API tier sends).
func randText(rng *rand.Rand) string {
	r := make([]rune, rng.IntN(12))
	for i := range r {
		r[i] = textAlphabet[rng.IntN(len(textAlphabet))]
	}
	return string(r)
}

func TestAppendNotificationExact(t *testing.T) {
	n := testNotification()
	noData := &protocol.Notification{ChannelID: testChid, Version: "v1", TTL: 60, Timestamp: 5}
	headersNoData := &protocol.Notification{ChannelID: testChid, Version: "v2", Headers: n.Headers}
	for _, tt := range []struct{ got, want string }{
		{string(AppendNotification(nil, n)),
			`{"channelID":"` + testChid + `","version":"` + n.Version + `","ttl":3600,"topic":"weather","timestamp":1718000123,"sortkey_timestamp":1718000123456789012,"data":"` + n.Data +
				`","headers":{"encoding":"aesgcm","encryption":"` + n.Headers[1].Value + `","crypto_key":"` + n.Headers[2].Value + `"}}`},
		{string(AppendNotification(nil, noData)),
			`{"channelID":"` + testChid + `","version":"v1","ttl":60,"timestamp":5}`},
		{string(AppendNotification(nil, headersNoData)),
			`{"channelID":"` + testChid + `","version":"v2","ttl":0,"timestamp":0}`},
		{string(AppendNotification([]byte("x"), &protocol.Notification{ChannelID: "\"", Version: "\u2028"})),
			`x{"channelID":"\"","version":"\u2028","ttl":0,"timestamp":0}`},
	} {
		if tt.got != tt.want {
			t.Errorf("\n got %s\nwant %s", tt.got, tt.want)
		}
	}
}

func TestNotificationRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	var got protocol.Notification
	for i := 0; i < 3000; i++ {
		n := protocol.Notification{
			ChannelID: randText(rng), Version: randText(rng), Topic: randText(rng),
			TTL: rng.Int64N(1 << 40), Timestamp: rng.Int64(), SortKey: rng.Uint64(), Data: randText(rng),
		}
		if rng.IntN(4) == 0 {
			n.SortKey = 0
		}
		n.Tracked = rng.IntN(3) == 0
		if n.Data != "" {
			for k := rng.IntN(4); k > 0; k-- {
				n.Headers = append(n.Headers, protocol.Header{Name: fmt.Sprintf("h%d%s", k, randText(rng)), Value: randText(rng)})
			}
		}
		out := AppendNotification(nil, &n)
		// encoding/json agrees with the schema.
		var ej struct {
			ChannelID string            `json:"channelID"`
			Version   string            `json:"version"`
			TTL       int64             `json:"ttl"`
			Topic     *string           `json:"topic"`
			Timestamp int64             `json:"timestamp"`
			SortKey   uint64            `json:"sortkey_timestamp"`
			Data      string            `json:"data"`
			Headers   map[string]string `json:"headers"`
			Tracked   bool              `json:"tracked"`
		}
		if err := json.Unmarshal(out, &ej); err != nil {
			t.Fatalf("%s: %v", out, err)
		}
		if ej.ChannelID != n.ChannelID || ej.Version != n.Version || ej.TTL != n.TTL || ej.Timestamp != n.Timestamp ||
			ej.SortKey != n.SortKey || ej.Data != n.Data || ej.Tracked != n.Tracked || (ej.Topic == nil) != (n.Topic == "") || len(ej.Headers) != len(n.Headers) {
			t.Fatalf("encoding/json read %+v from %s", ej, out)
		}
		if err := DecodeNotification(out, &got); err != nil {
			t.Fatalf("DecodeNotification(%s): %v", out, err)
		}
		if len(n.Headers) == 0 {
			got.Headers = nil
		}
		if !reflect.DeepEqual(got, n) {
			t.Fatalf("round trip of %s\n got %+v\nwant %+v", out, got, n)
		}
	}
}

func TestDecodeNotification(t *testing.T) {
	// What autopush-rs's autoendpoint sends: topic null, unknown keys.
	in := `{"channelID":"` + testChid + `","version":"gAAA","ttl":60,"topic":null,"timestamp":1718000000,` +
		`"reliability_id":null,"data":"ZGF0YQ","headers":{"encoding":"aes128gcm","encoding":"aesgcm","x":"y"}}`
	var n protocol.Notification
	if err := DecodeNotification([]byte(in), &n); err != nil {
		t.Fatal(err)
	}
	want := protocol.Notification{ChannelID: testChid, Version: "gAAA", TTL: 60, Timestamp: 1718000000, Data: "ZGF0YQ",
		Headers: []protocol.Header{{Name: "encoding", Value: "aesgcm"}, {Name: "x", Value: "y"}}}
	if !reflect.DeepEqual(n, want) {
		t.Fatalf("got %+v\nwant %+v", n, want)
	}
	c := n.Clone()
	if err := DecodeNotification([]byte(`{"channelID":"c","version":"v","sortkey_timestamp":18446744073709551615,"data":null,"headers":null}`), &n); err != nil {
		t.Fatal(err)
	}
	if n.ChannelID != "c" || n.SortKey != 1<<64-1 || len(n.Headers) != 0 || n.Data != "" {
		t.Fatalf("reuse: %+v", n)
	}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("clone changed: %+v", c)
	}

	var hdrs strings.Builder
	hdrs.WriteString(`{"channelID":"c","version":"v","headers":{`)
	for i := 0; i <= maxHeaders; i++ {
		if i > 0 {
			hdrs.WriteByte(',')
		}
		fmt.Fprintf(&hdrs, `"h%d":"v"`, i)
	}
	hdrs.WriteString(`}}`)
	// The texts are the node API's 400 body.
	for _, tt := range []struct {
		in   string
		want error
		text string // "": not checked
	}{
		{``, protocol.ErrSyntax, "webpush: malformed JSON at offset 0: notification is not a JSON object"},
		{`[]`, protocol.ErrSyntax, ""},
		{`{"channelID":"c"}`, protocol.ErrInvalidField, "webpush: missing or invalid field at offset 0: notification needs channelID and version"},
		{`{"version":"v"}`, protocol.ErrInvalidField, ""},
		{`{"channelID":null,"version":"v"}`, protocol.ErrInvalidField, "webpush: missing or invalid field at offset 13: channelID is not a string"},
		{`{"channelID":"c","version":"v","ttl":-1}`, protocol.ErrInvalidField, "webpush: missing or invalid field at offset 39: ttl is not a non-negative integer"},
		{`{"channelID":"c","version":"v","ttl":1.5}`, protocol.ErrInvalidField, ""},
		{`{"channelID":"c","version":"v","ttl":"60"}`, protocol.ErrInvalidField, ""},
		{`{"channelID":"c","version":"v","timestamp":{}}`, protocol.ErrInvalidField, ""},
		{`{"channelID":"c","version":"v","sortkey_timestamp":-1}`, protocol.ErrInvalidField, "webpush: missing or invalid field at offset 51: sortkey_timestamp is not an unsigned 64-bit integer"},
		{`{"channelID":"c","version":"v","sortkey_timestamp":18446744073709551616}`, protocol.ErrInvalidField, ""},
		{`{"channelID":"c","version":"v","sortkey_timestamp":1e3}`, protocol.ErrInvalidField, ""},
		{`{"channelID":"c","version":"v","topic":5}`, protocol.ErrInvalidField, ""},
		{`{"channelID":"c","version":"v","tracked":1}`, protocol.ErrSyntax, ""},
		{`{"channelID":"c","version":"v","tracked":"true"}`, protocol.ErrSyntax, ""},
		{`{"channelID":"c","version":"v","headers":[]}`, protocol.ErrInvalidField, "webpush: missing or invalid field at offset 41: headers is not an object"},
		{`{"channelID":"c","version":"v","headers":{"a":1}}`, protocol.ErrInvalidField, ""},
		{`{"channelID":"c","version":"v","headers":{` + strings.Repeat(`"a":"b",`, 3) + `"z":"y"}} x`, protocol.ErrSyntax, ""},
		{`{"channelID":"c","version":"v","x":` + strings.Repeat("[", protocol.MaxDepth) + strings.Repeat("]", protocol.MaxDepth) + `}`, protocol.ErrLimit, ""},
		{"{\"channelID\":\"\xff\",\"version\":\"v\"}", protocol.ErrSyntax, "webpush: malformed JSON at offset 14: invalid UTF-8 in string"},
		{hdrs.String(), protocol.ErrLimit, ""},
	} {
		var n protocol.Notification
		err := DecodeNotification([]byte(tt.in), &n)
		var de *protocol.DecodeError
		if !errors.Is(err, tt.want) || !errors.As(err, &de) || tt.text != "" && err.Error() != tt.text {
			t.Errorf("DecodeNotification(%.80s) = %v, want %v %s", tt.in, err, tt.want, tt.text)
		}
	}
}

// TestCodecZeroAlloc: encoding into a buffer with room, and decoding into
// a reused notification, allocate nothing.
func TestCodecZeroAlloc(t *testing.T) {
	n := testNotification()
	dst := make([]byte, 0, 1024)
	if allocs := testing.AllocsPerRun(100, func() { dst = AppendNotification(dst[:0], n) }); allocs != 0 {
		t.Errorf("AppendNotification: %v allocs, want 0", allocs)
	}
	var got protocol.Notification
	src := AppendNotification(nil, n)
	buf := make([]byte, len(src))
	allocs := testing.AllocsPerRun(100, func() {
		copy(buf, src)
		if err := DecodeNotification(buf, &got); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("DecodeNotification reusing n: %v allocs, want 0", allocs)
	}
}
