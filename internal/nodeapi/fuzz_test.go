package nodeapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/autopush-go/autopush/internal/protocol"
)

// FuzzDecodeNotification: no panic, no read past len, errors are
// categorised *protocol.DecodeError inside the input, and an accepted body
// means what encoding/json says it means and survives re-encoding.
func FuzzDecodeNotification(f *testing.F) {
	inputs := []string{
		string(AppendNotification(nil, testNotification())),
		string(AppendNotification(nil, &protocol.Notification{ChannelID: "c", Version: "v"})),
		`{"channelID":"c","version":"v","ttl":60,"topic":null,"timestamp":1,"reliability_id":null,"data":"ZA","headers":{"encoding":"aesgcm","encryption":"salt=x","crypto_key":"dh=y"}}`,
		`{"channelID":"c\u00e9","version":"v","sortkey_timestamp":18446744073709551615,"headers":{"a":"1","a":"2"}}`,
	}
	for _, s := range inputs {
		for i := 0; i <= len(s); i++ { // every prefix: a truncated body fails cleanly
			f.Add([]byte(s[:i]))
		}
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		exact := make([]byte, len(in)) // cap == len: a read past len panics
		copy(exact, in)
		var n protocol.Notification
		err := DecodeNotification(exact, &n)
		padded := make([]byte, len(in), len(in)+8)
		copy(padded, in)
		copy(padded[len(in):cap(padded)], `"}]:,"1 `)
		var n2 protocol.Notification
		err2 := DecodeNotification(padded, &n2)
		if fmt.Sprint(err) != fmt.Sprint(err2) || fmt.Sprintf("%+v", n) != fmt.Sprintf("%+v", n2) {
			t.Fatalf("result depends on bytes past len: %v / %v", err, err2)
		}
		if err != nil {
			var de *protocol.DecodeError
			categorised := errors.Is(err, protocol.ErrSyntax) || errors.Is(err, protocol.ErrInvalidField) || errors.Is(err, protocol.ErrLimit)
			if !errors.As(err, &de) || !categorised || de.Offset < 0 || de.Offset > len(in) {
				t.Fatalf("error %T %v (input of %d bytes)", err, err, len(in))
			}
			return
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(in, &obj); err != nil {
			t.Fatalf("DecodeNotification accepted %q, encoding/json: %v", in, err)
		}
		var chid, ver string
		if json.Unmarshal(obj["channelID"], &chid) != nil || json.Unmarshal(obj["version"], &ver) != nil ||
			chid != n.ChannelID || ver != n.Version {
			t.Fatalf("channelID/version differ from encoding/json: %+v", n)
		}
		if raw, ok := obj["headers"]; ok {
			var h map[string]string
			if err := json.Unmarshal(raw, &h); err != nil || len(h) != len(n.Headers) {
				t.Fatalf("headers %s: %v vs %+v", raw, err, n.Headers)
			}
			for _, x := range n.Headers {
				if h[x.Name] != x.Value {
					t.Fatalf("header %q: %q vs %q", x.Name, h[x.Name], x.Value)
				}
			}
		}
		// Re-encoding and decoding again is lossless (except headers
		// without data, which the encoder leaves out).
		c := n.Clone()
		if c.Data == "" || len(c.Headers) == 0 {
			c.Headers = nil
		}
		var back protocol.Notification
		if err := DecodeNotification(AppendNotification(nil, &c), &back); err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if len(back.Headers) == 0 {
			back.Headers = nil
		}
		if !reflect.DeepEqual(back, c) {
			t.Fatalf("re-encode round trip\n got %+v\nwant %+v", back, c)
		}
	})
}

// FuzzNotificationRoundTrip: any notification encodes to valid JSON that
// DecodeNotification reads back, each string as encoding/json reads it
// (invalid UTF-8 bytes replaced by U+FFFD), every number exactly.
func FuzzNotificationRoundTrip(f *testing.F) {
	f.Add(testChid, "gAAAAB", "mail", "ZGF0YQ", "aes128gcm", int64(60), uint64(5))
	f.Add("\"\\\x00\x1f\u2028", "\xff\xfe", "é€😀", "\xed\xa0\x80", "", int64(0), uint64(0))
	f.Add("", "", "\ufffd", "", "x", int64(1)<<62, uint64(1)<<63)
	f.Fuzz(func(t *testing.T, chid, ver, topic, data, hval string, ttl int64, sortkey uint64) {
		if len(chid)+len(ver)+len(topic)+len(data)+len(hval) > 512 {
			return // escaping bugs show on short strings; long ones only slow the fuzzer
		}
		if ttl < 0 {
			ttl = -(ttl + 1)
		}
		n := &protocol.Notification{ChannelID: chid, Version: ver, TTL: ttl, Topic: topic, Timestamp: ttl / 2, SortKey: sortkey,
			Data: data, Headers: []protocol.Header{{Name: "encoding", Value: hval}, {Name: "crypto_key", Value: ver}}}
		body := AppendNotification(nil, n)
		var ej struct {
			ChannelID, Version, Topic, Data string
			Headers                         map[string]string
		}
		if err := json.Unmarshal(body, &ej); err != nil {
			t.Fatalf("invalid JSON %q: %v", body, err)
		}
		var got protocol.Notification
		if err := DecodeNotification(body, &got); err != nil {
			t.Fatalf("DecodeNotification(%q): %v", body, err)
		}
		want := protocol.Notification{ChannelID: ej.ChannelID, Version: ej.Version, TTL: ttl, Topic: ej.Topic,
			Timestamp: ttl / 2, SortKey: sortkey, Data: ej.Data}
		if data != "" {
			want.Headers = []protocol.Header{{Name: "encoding", Value: ej.Headers["encoding"]}, {Name: "crypto_key", Value: ej.Headers["crypto_key"]}}
		}
		if len(got.Headers) == 0 {
			got.Headers = nil
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("round trip of %q\n got %+v\nwant %+v", body, got, want)
		}
	})
}
