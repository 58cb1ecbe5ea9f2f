package protocol

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"testing"
	"unicode/utf8"
)

func TestZeroAllocEncode(t *testing.T) {
	n := testNotification()
	dst := make([]byte, 0, 4096)
	changed := []Broadcast{{"remote-settings/monitor_changes", `"1234"`}}
	errs := []Broadcast{{"x", BroadcastNotFound}}
	uaid := [16]byte{1, 2, 3}
	allocs := testing.AllocsPerRun(100, func() {
		d := AppendNotification(dst[:0], n)
		d = AppendTrackedNotification(d, n, [16]byte{9})
		d = AppendHelloReply(d, uaid, 200, changed, errs)
		d = AppendRegisterReply(d, testChid, 200, "https://push.example.com/wpush/v2/abc")
		d = AppendUnregisterReply(d, testChid, 200)
		d = AppendBroadcast(d, changed, errs)
		d = AppendPingReply(d)
		_ = AppendUAID(d, uaid)
	})
	if allocs != 0 {
		t.Errorf("encoders: %v allocs, want 0", allocs)
	}
}

func testNotification() *Notification {
	return &Notification{
		ChannelID: testChid,
		Version:   "gAAAAABmX2Z0aWxlX3ZlcnNpb24tbG9uZ2VyLXRoYW4tdGhpcw",
		TTL:       86400,
		Topic:     "mail",
		Timestamp: 1718000000,
		SortKey:   1718000000123,
		Data:      "I1BsxtFZ7ciIGzOsmDAu_BO3GvLgRb4vI1Lww8ClDAUe0fwc7rO1DHe9gshfIuNdGt0GXp4YKqdZ0M3EzTXZ6tHdU7-lXQ",
		Headers:   []Header{{"encoding", "aes128gcm"}},
	}
}

func TestServerMessagesExact(t *testing.T) {
	uaid, _ := ParseUAID("4f2d1e0c9b8a47d6a5b4c3d2e1f00a1b")
	n := testNotification()
	noData := &Notification{ChannelID: testChid, Version: "v1", TTL: 60, Timestamp: 5}
	aesgcm := &Notification{ChannelID: testChid, Version: "v2", Data: "ZGF0YQ", Headers: []Header{
		{"encoding", "aesgcm"}, {"encryption", "salt=abc"}, {"crypto_key", "dh=def"}}}
	tests := []struct {
		got, want string
	}{
		{string(AppendHelloReply(nil, uaid, 200, nil, nil)),
			`{"messageType":"hello","uaid":"4f2d1e0c9b8a47d6a5b4c3d2e1f00a1b","status":200,"use_webpush":true,"broadcasts":{}}`},
		{string(AppendHelloReply(nil, uaid, 200, []Broadcast{{"a", "v1"}, {"b", `"2"`}}, []Broadcast{{"c", BroadcastNotFound}})),
			`{"messageType":"hello","uaid":"4f2d1e0c9b8a47d6a5b4c3d2e1f00a1b","status":200,"use_webpush":true,"broadcasts":{"a":"v1","b":"\"2\"","errors":{"c":"Broadcast not found"}}}`},
		{string(AppendHelloReply(nil, uaid, 503, nil, []Broadcast{{"c", BroadcastNotFound}})),
			`{"messageType":"hello","uaid":"4f2d1e0c9b8a47d6a5b4c3d2e1f00a1b","status":503,"use_webpush":true,"broadcasts":{"errors":{"c":"Broadcast not found"}}}`},
		{string(AppendRegisterReply(nil, testChid, 200, "https://push.example.com/wpush/v2/gAAA")),
			`{"messageType":"register","channelID":"` + testChid + `","status":200,"pushEndpoint":"https://push.example.com/wpush/v2/gAAA"}`},
		{string(AppendRegisterReply(nil, testChid, 400, "")),
			`{"messageType":"register","channelID":"` + testChid + `","status":400}`},
		{string(AppendUnregisterReply(nil, testChid, 200)),
			`{"messageType":"unregister","channelID":"` + testChid + `","status":200}`},
		{string(AppendPingReply(nil)), `{}`},
		{string(AppendNotification(nil, n)),
			`{"messageType":"notification","channelID":"` + testChid + `","version":"` + n.Version + `","data":"` + n.Data + `","headers":{"encoding":"aes128gcm"}}`},
		{string(AppendNotification(nil, noData)),
			`{"messageType":"notification","channelID":"` + testChid + `","version":"v1"}`},
		{string(AppendTrackedNotification(nil, n, [16]byte{0xab, 1, 15: 0xff})),
			`{"messageType":"notification","channelID":"` + testChid + `","version":"` + n.Version + `","data":"` + n.Data +
				`","headers":{"encoding":"aes128gcm"},"reliability_id":"ab0100000000000000000000000000ff"}`},
		{string(AppendTrackedNotification(nil, noData, [16]byte{})),
			`{"messageType":"notification","channelID":"` + testChid + `","version":"v1","reliability_id":"00000000000000000000000000000000"}`},
		{string(AppendNotification(nil, aesgcm)),
			`{"messageType":"notification","channelID":"` + testChid + `","version":"v2","data":"ZGF0YQ","headers":{"encoding":"aesgcm","encryption":"salt=abc","crypto_key":"dh=def"}}`},
		{string(AppendBroadcast(nil, []Broadcast{{"remote-settings/monitor_changes", `"1235"`}}, nil)),
			`{"messageType":"broadcast","broadcasts":{"remote-settings/monitor_changes":"\"1235\""}}`},
		{string(AppendBroadcast(nil, nil, []Broadcast{{"x", BroadcastNotFound}})),
			`{"messageType":"broadcast","broadcasts":{"errors":{"x":"Broadcast not found"}}}`},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("\n got %s\nwant %s", tt.got, tt.want)
		}
		if !json.Valid([]byte(tt.got)) {
			t.Errorf("invalid JSON: %s", tt.got)
		}
	}
}

// TestEncodersAgainstEncodingJSON encodes random strings and checks that
// encoding/json reads back the same values.
func TestEncodersAgainstEncodingJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 2000; i++ {
		chid, ver, endpoint, data := randString(rng), randString(rng), randString(rng), randString(rng)
		bc := []Broadcast{{randString(rng), randString(rng)}}
		status := rng.IntN(600)
		checkEncoded(t, AppendRegisterReply(nil, chid, status, endpoint), map[string]any{
			"messageType": "register", "channelID": fixUTF8(chid), "status": float64(status), "pushEndpoint": fixUTF8(endpoint)},
			endpoint == "")
		checkEncoded(t, AppendUnregisterReply(nil, chid, status), map[string]any{
			"messageType": "unregister", "channelID": fixUTF8(chid), "status": float64(status)}, false)
		n := &Notification{ChannelID: chid, Version: ver, Data: data, Headers: []Header{{"encoding", randString(rng)}}}
		want := map[string]any{"messageType": "notification", "channelID": fixUTF8(chid), "version": fixUTF8(ver)}
		if data != "" {
			want["data"] = fixUTF8(data)
			want["headers"] = map[string]any{"encoding": fixUTF8(n.Headers[0].Value)}
		}
		checkEncoded(t, AppendNotification(nil, n), want, false)
		bwant := map[string]any{}
		bwant[fixUTF8(bc[0].ID)] = fixUTF8(bc[0].Version)
		if fixUTF8(bc[0].ID) != "errors" {
			bwant["errors"] = map[string]any{"e": "Broadcast not found"}
			checkEncoded(t, AppendBroadcast(nil, bc, []Broadcast{{"e", BroadcastNotFound}}),
				map[string]any{"messageType": "broadcast", "broadcasts": bwant}, false)
		}
	}
}

func checkEncoded(t *testing.T, out []byte, want map[string]any, dropEndpoint bool) {
	t.Helper()
	if dropEndpoint {
		delete(want, "pushEndpoint")
	}
	if !json.Valid(out) || !utf8.Valid(out) {
		t.Fatalf("invalid JSON or UTF-8: %q", out)
	}
	var got map[string]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("encoded %q\n got %#v\nwant %#v", out, got, want)
	}
}
