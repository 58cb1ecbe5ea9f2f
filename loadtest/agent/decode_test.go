package agent

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestDecodeServerMsg reads the messages an autopush server sends.
func TestDecodeServerMsg(t *testing.T) {
	var m serverMsg
	in := `{"messageType":"notification","channelID":"b8b1b2e4-6b61-4d3b-a5d5-d2b8c4a0f9e1","version":"gAAAA\u0041B",` +
		`"data":"AAEC","headers":{"encoding":"aes128gcm","x":"y"},"ttl":60,"extra":[1,{"a":null}]}`
	if err := decodeServerMsg([]byte(in), &m); err != nil {
		t.Fatal(err)
	}
	if m.MessageType != "notification" || m.ChannelID != "b8b1b2e4-6b61-4d3b-a5d5-d2b8c4a0f9e1" || m.Version != "gAAAAAB" ||
		m.Data != "AAEC" || m.Encoding != "aes128gcm" {
		t.Fatalf("decoded %+v", m)
	}
	m = serverMsg{}
	in = ` {"messageType":"hello","uaid":"5f0ab9c6d1e34b1c8f7e2d6a4b3c2d1e","status":200,"use_webpush":true,` +
		`"broadcasts":{"remote-settings/monitor_changes":"\"1700000000000\"","errors":{"x":"unknown"}}} `
	if err := decodeServerMsg([]byte(in), &m); err != nil {
		t.Fatal(err)
	}
	if m.MessageType != "hello" || m.UAID != "5f0ab9c6d1e34b1c8f7e2d6a4b3c2d1e" || m.Status != 200 || len(m.Broadcasts) != 2 ||
		m.Broadcasts[0].id != "remote-settings/monitor_changes" || string(m.Broadcasts[0].raw) != `"\"1700000000000\""` ||
		m.Broadcasts[1].id != "errors" || string(m.Broadcasts[1].raw) != `{"x":"unknown"}` {
		t.Fatalf("decoded %+v", m)
	}
	for _, bad := range []string{``, `[]`, `{"status":"200"}`, `{"status":2.5}`, `{"messageType":1}`,
		`{"headers":{"encoding":1}}`, `{"headers":[]}`, `{"broadcasts":"x"}`, `{} {}`, `{"a":}`, `{"messageType":"x"`} {
		if err := decodeServerMsg([]byte(bad), &serverMsg{}); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
	m = serverMsg{}
	if err := decodeServerMsg([]byte(`{"uaid":null,"status":null,"headers":null,"broadcasts":null}`), &m); err != nil ||
		m.UAID != "" || m.Status != 0 {
		t.Fatalf("nulls: %v %+v", err, m)
	}
}

// jsonMsg is serverMsg as encoding/json decodes it.
type jsonMsg struct {
	MessageType  string                     `json:"messageType"`
	UAID         string                     `json:"uaid"`
	Status       int                        `json:"status"`
	ChannelID    string                     `json:"channelID"`
	PushEndpoint string                     `json:"pushEndpoint"`
	Version      string                     `json:"version"`
	Data         string                     `json:"data"`
	Headers      map[string]string          `json:"headers"`
	Broadcasts   map[string]json.RawMessage `json:"broadcasts"`
}

// FuzzDecodeServerMsg: no input panics, and what decodeServerMsg accepts
// encoding/json accepts too (never more lenient than the decoder it
// replaced); with no key in another case, the fields agree.
func FuzzDecodeServerMsg(f *testing.F) {
	for _, s := range []string{`{"messageType":"notification","channelID":"c","version":"v","data":"AAEC","headers":{"encoding":"aes128gcm"}}`,
		`{"messageType":"hello","uaid":"u","status":200,"broadcasts":{"a":"\"1\""}}`, `{"messageType":"register","status":200,"pushEndpoint":"http://x/wpush/v2/y"}`,
		`{}`, `{"status":-1}`, `{"data":"\ud83d\ude00"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var want jsonMsg
		jsonErr := json.Unmarshal(in, &want)
		var m serverMsg
		err := decodeServerMsg(append([]byte(nil), in...), &m)
		if err != nil {
			return
		}
		if !exactKeys(in) {
			return // encoding/json read a key the decoder rightly skips
		}
		if jsonErr != nil {
			t.Fatalf("accepted %q, which encoding/json refuses: %v", in, jsonErr)
		}
		if m.MessageType != want.MessageType || m.UAID != want.UAID || m.Status != want.Status || m.ChannelID != want.ChannelID ||
			m.PushEndpoint != want.PushEndpoint || m.Version != want.Version || m.Data != want.Data || m.Encoding != want.Headers["encoding"] {
			t.Fatalf("%q: decoded %+v, encoding/json %+v", in, m, want)
		}
	})
}

// exactKeys reports whether no top-level key of in is one of the decoded
// names in another case (encoding/json matches those, the decoder does
// not: an autopush server sends exact keys). Input that is not a JSON
// object has no such key.
func exactKeys(in []byte) bool {
	var top map[string]json.RawMessage
	if json.Unmarshal(in, &top) != nil {
		return true
	}
	for k := range top {
		for _, n := range []string{"messageType", "uaid", "status", "channelID", "pushEndpoint", "version", "data", "headers", "broadcasts"} {
			if k != n && strings.EqualFold(k, n) {
				return false
			}
		}
	}
	return true
}
