package protocol

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

func TestNotificationJSONRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	var got Notification
	for i := 0; i < 3000; i++ {
		n := Notification{
			ChannelID: validString(rng), Version: validString(rng), Topic: validString(rng),
			TTL: rng.Int64N(1 << 40), Timestamp: rng.Int64(), SortKey: rng.Uint64(), Data: validString(rng),
		}
		if rng.IntN(4) == 0 {
			n.SortKey = 0
		}
		if n.Data != "" {
			for k := rng.IntN(4); k > 0; k-- {
				n.Headers = append(n.Headers, Header{fmt.Sprintf("h%d%s", k, validString(rng)), validString(rng)})
			}
		}
		out := AppendNotificationJSON(nil, &n)
		if !json.Valid(out) {
			t.Fatalf("invalid JSON %s", out)
		}
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
		}
		if err := json.Unmarshal(out, &ej); err != nil {
			t.Fatal(err)
		}
		if ej.ChannelID != n.ChannelID || ej.Version != n.Version || ej.TTL != n.TTL || ej.Timestamp != n.Timestamp ||
			ej.SortKey != n.SortKey || ej.Data != n.Data || (ej.Topic == nil) != (n.Topic == "") || len(ej.Headers) != len(n.Headers) {
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
	var n Notification
	if err := DecodeNotification([]byte(in), &n); err != nil {
		t.Fatal(err)
	}
	want := Notification{ChannelID: testChid, Version: "gAAA", TTL: 60, Timestamp: 1718000000, Data: "ZGF0YQ",
		Headers: []Header{{"encoding", "aesgcm"}, {"x", "y"}}}
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

	bad := []struct {
		in   string
		want error
	}{
		{``, ErrSyntax},
		{`[]`, ErrSyntax},
		{`{"channelID":"c"}`, ErrInvalidField},
		{`{"version":"v"}`, ErrInvalidField},
		{`{"channelID":null,"version":"v"}`, ErrInvalidField},
		{`{"channelID":"c","version":"v","ttl":-1}`, ErrInvalidField},
		{`{"channelID":"c","version":"v","ttl":1.5}`, ErrInvalidField},
		{`{"channelID":"c","version":"v","ttl":"60"}`, ErrInvalidField},
		{`{"channelID":"c","version":"v","timestamp":{}}`, ErrInvalidField},
		{`{"channelID":"c","version":"v","sortkey_timestamp":-1}`, ErrInvalidField},
		{`{"channelID":"c","version":"v","sortkey_timestamp":18446744073709551616}`, ErrInvalidField},
		{`{"channelID":"c","version":"v","topic":5}`, ErrInvalidField},
		{`{"channelID":"c","version":"v","headers":[]}`, ErrInvalidField},
		{`{"channelID":"c","version":"v","headers":{"a":1}}`, ErrInvalidField},
		{`{"channelID":"c","version":"v","headers":{` + strings.Repeat(`"a":"b",`, 3) + `"z":"y"}} x`, ErrSyntax},
		{`{"channelID":"c","version":"v","x":` + strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth) + `}`, ErrLimit},
		{"{\"channelID\":\"\xff\",\"version\":\"v\"}", ErrSyntax},
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
	bad = append(bad, struct {
		in   string
		want error
	}{hdrs.String(), ErrLimit})
	for _, tt := range bad {
		var n Notification
		err := DecodeNotification([]byte(tt.in), &n)
		var de *DecodeError
		if !errors.Is(err, tt.want) || !errors.As(err, &de) {
			t.Errorf("DecodeNotification(%.80s) = %v, want %v", tt.in, err, tt.want)
		}
	}
}
