package protocol

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/autopush-go/autopush/internal/jsonscan"
)

// fuzzSeeds returns the example messages, some malformed ones, and
// every prefix of each (a truncated frame must fail cleanly, never panic).
func fuzzSeeds(whole []string) [][]byte {
	var seeds [][]byte
	for _, s := range whole {
		for i := 0; i <= len(s); i++ {
			seeds = append(seeds, []byte(s[:i]))
		}
	}
	return seeds
}

var fuzzClientInputs = append(append([]string{}, exampleMessages...),
	`{"messageType":"nack","version":"a\"b\\c\/d\b\f\n\r\t\u00e9\ud83d\ude00z","code":-0}`,
	`{"messageType":"ack","updates":[{"channelID":"a","version":"1"},{"channelID":"b","version":"2","code":null},{"channelID":"c","version":"3"},{"channelID":"d","version":"4"},{"channelID":"e","version":"5","x":[{}]}]}`,
	`{"x":{"a":[1,-2.5e+3,true,false,null,"s",{}],"b":[]},"messageType":"ping","y":0.0}`,
	`{"messageType":"unregister","channelID":"c","code":4294967296}`,
	`{"messageType":"hello","uaid":null,"broadcasts":{"a":"1","a":"2"},"use_webpush":"x"}`,
	"{\"messageType\":\"nack\",\"version\":\"\xff\"}",
	`{"message\u0054ype":"register","channelID":"c","channelID":5}`,
)

// FuzzDecodeClient: DecodeClient never panics, never reads past len(buf),
// returns only *DecodeError, and whatever it accepts encoding/json accepts
// too and reads the same values from.
func FuzzDecodeClient(f *testing.F) {
	for _, s := range fuzzSeeds(fuzzClientInputs) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		exact := make([]byte, len(in)) // cap == len: a read past len panics
		copy(exact, in)
		var m ClientMessage
		err := DecodeClient(exact, &m)

		// Same input with bytes that would change the result behind len
		// (a decoder slicing up to cap instead of len would diverge), into
		// a reused message that held other values (nothing may leak over).
		padded := make([]byte, len(in), len(in)+8)
		copy(padded, in)
		copy(padded[len(in):cap(padded)], `"}]:,"1 `)
		var m2 ClientMessage
		for _, prev := range []string{ffHelloAgain, fuzzClientInputs[len(exampleMessages)+1]} {
			if err := DecodeClient([]byte(prev), &m2); err != nil {
				t.Fatal(err)
			}
		}
		err2 := DecodeClient(padded, &m2)
		if fmt.Sprint(err) != fmt.Sprint(err2) || fmt.Sprintf("%+v", view(&m)) != fmt.Sprintf("%+v", view(&m2)) {
			t.Fatalf("result depends on bytes past len: %v / %v", err, err2)
		}

		if err != nil {
			checkDecodeError(t, err, len(in))
			if m.Type != MsgUnknown {
				t.Fatalf("failed decode left Type %v", m.Type)
			}
			return
		}
		compareWithEncodingJSON(t, in, &m)
	})
}

func checkDecodeError(t *testing.T, err error, n int) {
	t.Helper()
	var de *DecodeError
	if !errors.As(err, &de) {
		t.Fatalf("error %T %v is not a *DecodeError", err, err)
	}
	if de.Offset < 0 || de.Offset > max(n, MaxClientMessageSize) {
		t.Fatalf("offset %d outside input of %d bytes", de.Offset, n)
	}
	if !errors.Is(err, ErrSyntax) && !errors.Is(err, ErrUnknownType) && !errors.Is(err, ErrInvalidField) && !errors.Is(err, ErrLimit) {
		t.Fatalf("uncategorised error %v", err)
	}
}

// compareWithEncodingJSON checks that encoding/json reads in as an object
// holding the values DecodeClient produced.
func compareWithEncodingJSON(t *testing.T, in []byte, m *ClientMessage) {
	t.Helper()
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(in, &obj); err != nil {
		t.Fatalf("DecodeClient accepted %q, encoding/json: %v", in, err)
	}
	str := func(key string) (string, bool) {
		raw, ok := obj[key]
		if !ok || string(raw) == "null" {
			return "", false
		}
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		return s, true
	}
	typ, ok := str("messageType")
	switch {
	case !ok && (len(obj) != 0 || m.Type != MsgPing):
		t.Fatalf("no messageType in %q, decoded as %v", in, m.Type)
	case ok && typ != m.Type.String():
		t.Fatalf("messageType %q, decoded as %v", typ, m.Type)
	}
	checkStr := func(key, got string, has bool) {
		want, ok := str(key)
		if ok != has || want != got {
			t.Fatalf("%s: encoding/json %q (%v), DecodeClient %q (%v)", key, want, ok, got, has)
		}
	}
	checkCode := func(raw json.RawMessage, present bool, got int64, has bool) {
		if !present || string(raw) == "null" {
			if has {
				t.Fatalf("code %d decoded from nothing", got)
			}
			return
		}
		var want int64
		if err := json.Unmarshal(raw, &want); err != nil || !has || want != got {
			t.Fatalf("code %s: decoded %d (%v), %v", raw, got, has, err)
		}
	}
	switch m.Type {
	case MsgHello:
		checkStr("uaid", m.UAID, m.HasUAID)
		checkBroadcasts(t, obj, m)
	case MsgRegister:
		checkStr("channelID", m.ChannelID, true)
		checkStr("key", m.Key, hasString(obj, "key"))
	case MsgUnregister:
		checkStr("channelID", m.ChannelID, true)
		raw, ok := obj["code"]
		checkCode(raw, ok, m.Code, m.HasCode)
	case MsgNack:
		checkStr("version", m.Version, true)
		raw, ok := obj["code"]
		checkCode(raw, ok, m.Code, m.HasCode)
	case MsgAck:
		var ups []map[string]json.RawMessage
		if err := json.Unmarshal(obj["updates"], &ups); err != nil || len(ups) != len(m.Updates) {
			t.Fatalf("updates %s: %v, decoded %d", obj["updates"], err, len(m.Updates))
		}
		for i, u := range ups {
			var chid, ver string
			if json.Unmarshal(u["channelID"], &chid) != nil || json.Unmarshal(u["version"], &ver) != nil ||
				chid != m.Updates[i].ChannelID || ver != m.Updates[i].Version {
				t.Fatalf("update %d: %v vs %+v", i, u, m.Updates[i])
			}
			raw, ok := u["code"]
			checkCode(raw, ok, int64(m.Updates[i].Code), m.Updates[i].HasCode)
		}
	case MsgBroadcastSubscribe:
		checkBroadcasts(t, obj, m)
	}
}

func hasString(obj map[string]json.RawMessage, key string) bool {
	raw, ok := obj[key]
	return ok && len(raw) > 0 && raw[0] == '"'
}

func checkBroadcasts(t *testing.T, obj map[string]json.RawMessage, m *ClientMessage) {
	t.Helper()
	raw, ok := obj["broadcasts"]
	if !ok || string(raw) == "null" {
		if m.HasBroadcasts || len(m.Broadcasts) != 0 {
			t.Fatalf("broadcasts decoded from nothing: %+v", m.Broadcasts)
		}
		return
	}
	var want map[string]string
	if err := json.Unmarshal(raw, &want); err != nil {
		t.Fatalf("broadcasts %s: %v", raw, err)
	}
	if !reflect.DeepEqual(want, broadcastMap(m.Broadcasts)) || len(want) != len(m.Broadcasts) || !m.HasBroadcasts {
		t.Fatalf("broadcasts: encoding/json %v, DecodeClient %+v", want, m.Broadcasts)
	}
}

// FuzzAppendRoundTrip: any strings through the encoders give valid JSON
// from which encoding/json reads the same strings (invalid UTF-8 bytes
// replaced by U+FFFD), and DecodeClient reads escaped strings back. (The
// node API body's round trip is nodeapi's FuzzNotificationRoundTrip.)
func FuzzAppendRoundTrip(f *testing.F) {
	f.Add(testChid, "gAAAAB", "ZGF0YQ", "aes128gcm", "https://push.example.com/wpush/v2/x", "mail", 200, int64(60), uint64(5))
	f.Add("\"\\\x00\x1f\u2028", "\xff\xfe", "é€😀", "\xed\xa0\x80", "", "", 400, int64(0), uint64(0))
	f.Add("", "", "", "", "", "\ufffd", -1, int64(1)<<62, uint64(1)<<63)
	f.Fuzz(func(t *testing.T, chid, ver, data, hval, endpoint, topic string, status int, ttl int64, sortkey uint64) {
		// Escaping bugs show on short strings; long ones only make each
		// run and every minimization slow.
		if len(chid)+len(ver)+len(data)+len(hval)+len(endpoint)+len(topic) > 512 {
			return
		}
		if ttl < 0 {
			ttl = -(ttl + 1)
		}
		n := &Notification{ChannelID: chid, Version: ver, TTL: ttl, Topic: topic, Timestamp: ttl / 2, SortKey: sortkey,
			Data: data, Headers: []Header{{"encoding", hval}, {"crypto_key", ver}}}
		wantN := map[string]any{"messageType": "notification", "channelID": fixUTF8(chid), "version": fixUTF8(ver)}
		if data != "" {
			wantN["data"] = fixUTF8(data)
			wantN["headers"] = map[string]any{"encoding": fixUTF8(hval), "crypto_key": fixUTF8(ver)}
		}
		checkEncoded(t, AppendNotification(nil, n), wantN, false)
		checkEncoded(t, AppendRegisterReply(nil, chid, status, endpoint), map[string]any{
			"messageType": "register", "channelID": fixUTF8(chid), "status": float64(status), "pushEndpoint": fixUTF8(endpoint)}, endpoint == "")
		checkEncoded(t, AppendUnregisterReply(nil, chid, status), map[string]any{
			"messageType": "unregister", "channelID": fixUTF8(chid), "status": float64(status)}, false)
		bw := map[string]any{fixUTF8(chid): fixUTF8(ver)}
		if fixUTF8(chid) != "errors" {
			bw["errors"] = map[string]any{fixUTF8(topic): fixUTF8(endpoint)}
			checkEncoded(t, AppendBroadcast(nil, []Broadcast{{chid, ver}}, []Broadcast{{topic, endpoint}}),
				map[string]any{"messageType": "broadcast", "broadcasts": bw}, false)
		}

		// A client message built by the encoder's string escaping decodes
		// back to the same strings.
		msg := []byte(`{"messageType":"register","channelID":` + string(jsonscan.AppendString(nil, chid)) +
			`,"key":` + string(jsonscan.AppendString(nil, ver)) + `}`)
		if len(msg) > MaxClientMessageSize {
			return
		}
		var m ClientMessage
		if err := DecodeClient(msg, &m); err != nil {
			t.Fatalf("DecodeClient(%q): %v", msg, err)
		}
		if m.ChannelID != fixUTF8(chid) || m.Key != fixUTF8(ver) {
			t.Fatalf("DecodeClient(%q) = %q %q", msg, m.ChannelID, m.Key)
		}
	})
}
