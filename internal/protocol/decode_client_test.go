package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

func TestDecodeClientValid(t *testing.T) {
	const ver = "gAAAAABmX2Z0aWxlX3ZlcnNpb24"
	upd := func(chid, ver string, code int, has bool) AckUpdate {
		return AckUpdate{ChannelID: chid, Version: ver, Code: code, HasCode: has}
	}
	tests := []struct {
		name string
		in   string
		want decoded
	}{
		{"firefox first hello", ffHelloFirst, decoded{Type: MsgHello, UseWebPush: true, HasBroadcasts: true}},
		{"firefox hello again", ffHelloAgain, decoded{Type: MsgHello, UAID: "4f2d1e0c9b8a47d6a5b4c3d2e1f00a1b", HasUAID: true, UseWebPush: true,
			Broadcasts: []Broadcast{{"remote-settings/monitor_changes", `"1234"`}}, HasBroadcasts: true}},
		{"hello minimal", `{"messageType":"hello"}`, decoded{Type: MsgHello}},
		{"hello empty uaid", `{"messageType":"hello","uaid":""}`, decoded{Type: MsgHello, HasUAID: true}},
		{"hello null uaid", `{"messageType":"hello","uaid":null,"broadcasts":null}`, decoded{Type: MsgHello}},
		{"hello use_webpush wrong type is ignored", `{"messageType":"hello","use_webpush":"yes"}`, decoded{Type: MsgHello}},
		{"hello ignores foreign keys of any type", `{"messageType":"hello","code":"x","updates":5,"channelID":[]}`, decoded{Type: MsgHello}},
		{"firefox register", ffRegister, decoded{Type: MsgRegister, ChannelID: testChid,
			Key: "BNr_X8Qz4xyl7Nq3BU2hKDZ4ElM5jr1GnCaR6xPN0pqBj8jvG6ogJ8E4nHCtR-vHxQvC_PjyAA5VjKRZBeiBUUY="}},
		{"register without key", ffRegisterNoKy, decoded{Type: MsgRegister, ChannelID: testChid}},
		{"register null key", `{"messageType":"register","channelID":"x","key":null}`, decoded{Type: MsgRegister, ChannelID: "x"}},
		{"firefox unregister", ffUnregister, decoded{Type: MsgUnregister, ChannelID: testChid, Code: 200, HasCode: true}},
		{"unregister without code", `{"messageType":"unregister","channelID":"` + testChid + `"}`, decoded{Type: MsgUnregister, ChannelID: testChid}},
		{"unregister max code", `{"messageType":"unregister","channelID":"c","code":4294967295}`, decoded{Type: MsgUnregister, ChannelID: "c", Code: 4294967295, HasCode: true}},
		{"firefox ack", ffAck, decoded{Type: MsgAck, Updates: []AckUpdate{upd(testChid, ver, 100, true)}}},
		{"ack without code", `{"messageType":"ack","updates":[{"channelID":"c","version":"v"}]}`, decoded{Type: MsgAck, Updates: []AckUpdate{upd("c", "v", 0, false)}}},
		{"ack null code", `{"messageType":"ack","updates":[{"channelID":"c","version":"v","code":null,"extra":{"a":[1]}}]}`, decoded{Type: MsgAck, Updates: []AckUpdate{upd("c", "v", 0, false)}}},
		{"ack empty", `{"messageType":"ack","updates":[]}`, decoded{Type: MsgAck}},
		{"ack six updates", `{"messageType":"ack","updates":[` +
			`{"channelID":"a","version":"1","code":100},{"channelID":"b","version":"2","code":101},{"channelID":"c","version":"3","code":102},` +
			`{"channelID":"d","version":"4"},{"channelID":"e","version":"5","code":0},{"channelID":"f","version":"6","code":65535}]}`,
			decoded{Type: MsgAck, Updates: []AckUpdate{upd("a", "1", 100, true), upd("b", "2", 101, true), upd("c", "3", 102, true),
				upd("d", "4", 0, false), upd("e", "5", 0, true), upd("f", "6", 65535, true)}}},
		{"firefox nack", ffNack, decoded{Type: MsgNack, Version: ver, Code: 301, HasCode: true}},
		{"nack negative code", `{"messageType":"nack","version":"v","code":-2147483648}`, decoded{Type: MsgNack, Version: "v", Code: -2147483648, HasCode: true}},
		{"nack -0", `{"messageType":"nack","version":"v","code":-0}`, decoded{Type: MsgNack, Version: "v", HasCode: true}},
		{"ping empty object", ffPingEmpty, decoded{Type: MsgPing}},
		{"ping spaced", " \t\r\n{ \n } \n", decoded{Type: MsgPing}},
		{"ping typed", ffPing, decoded{Type: MsgPing}},
		{"ping with extras", `{"messageType":"ping","channelID":5}`, decoded{Type: MsgPing}},
		{"firefox broadcast_subscribe", ffBroadcastSub, decoded{Type: MsgBroadcastSubscribe,
			Broadcasts: []Broadcast{{"remote-settings/monitor_changes", `"1234"`}}, HasBroadcasts: true}},
		{"broadcast duplicates merge", `{"messageType":"broadcast_subscribe","broadcasts":{"a":"1","b":"2","a":"3"}}`,
			decoded{Type: MsgBroadcastSubscribe, Broadcasts: []Broadcast{{"a", "3"}, {"b", "2"}}, HasBroadcasts: true}},
		{"duplicate keys last wins", `{"messageType":"hello","channelID":"a","messageType":"register","channelID":"b","key":"k","key":null}`,
			decoded{Type: MsgRegister, ChannelID: "b"}},
		{"later good value clears bad", `{"messageType":"register","channelID":5,"channelID":"b"}`, decoded{Type: MsgRegister, ChannelID: "b"}},
		{"later updates replace earlier", `{"messageType":"ack","updates":[{"channelID":"a","version":"1"}],"updates":[{"channelID":"b","version":"2"}]}`,
			decoded{Type: MsgAck, Updates: []AckUpdate{upd("b", "2", 0, false)}}},
		{"escaped key", `{"message\u0054ype":"ping"}`, decoded{Type: MsgPing}},
		{"escapes", `{"messageType":"nack","version":"a\"b\\c\/d\b\f\n\r\t\u00e9\u20ac\ud83d\ude00z"}`,
			decoded{Type: MsgNack, Version: "a\"b\\c/d\b\f\n\r\t\u00e9\u20ac\U0001F600z"}},
		{"raw utf-8", `{"messageType":"nack","version":"é€😀"}`, decoded{Type: MsgNack, Version: "é€😀"}},
		{"unknown keys of every type", `{"x":{"a":[1,-2.5e+3,true,false,null,"s",{}],"b":[]},"messageType":"ping","y":0.0,"z":"\u0000"}`, decoded{Type: MsgPing}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := decodeString(t, tt.in)
			if err != nil {
				t.Fatalf("DecodeClient(%s): %v", tt.in, err)
			}
			if got := view(m); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("DecodeClient(%s)\n got %+v\nwant %+v", tt.in, got, tt.want)
			}
		})
	}
}

func TestDecodeClientErrors(t *testing.T) {
	deep := func(n int) string {
		return `{"messageType":"ping","x":` + strings.Repeat("[", n) + strings.Repeat("]", n) + `}`
	}
	var many strings.Builder
	many.WriteString(`{"messageType":"ack","updates":[`)
	for i := 0; i <= MaxAckUpdates; i++ {
		if i > 0 {
			many.WriteByte(',')
		}
		many.WriteString(`{"channelID":"c","version":"v"}`)
	}
	many.WriteString(`]}`)
	var bcasts strings.Builder
	bcasts.WriteString(`{"messageType":"broadcast_subscribe","broadcasts":{`)
	for i := 0; i <= MaxBroadcasts; i++ {
		if i > 0 {
			bcasts.WriteByte(',')
		}
		fmt.Fprintf(&bcasts, `"b%d":"v"`, i)
	}
	bcasts.WriteString(`}}`)

	tests := []struct {
		name   string
		in     string
		want   error
		offset int // -1: not checked
	}{
		{"empty input", ``, ErrSyntax, 0},
		{"spaces only", `   `, ErrSyntax, 3},
		{"array", `[]`, ErrSyntax, 0},
		{"null", `null`, ErrSyntax, 0},
		{"string", `"hello"`, ErrSyntax, 0},
		{"bom", "\xef\xbb\xbf{}", ErrSyntax, 0},
		{"unterminated object", `{`, ErrSyntax, 1},
		{"key without value", `{"a"}`, ErrSyntax, 4},
		{"missing value", `{"a":}`, ErrSyntax, 5},
		{"trailing comma", `{"a":1,}`, ErrSyntax, 7},
		{"missing comma", `{"a":1 "b":2}`, ErrSyntax, 7},
		{"unquoted key", `{a:1}`, ErrSyntax, 1},
		{"single quotes", `{'messageType':'ping'}`, ErrSyntax, 1},
		{"trailing garbage", `{} x`, ErrSyntax, 3},
		{"two objects", `{}{}`, ErrSyntax, 2},
		{"nul after object", "{}\x00", ErrSyntax, 2},
		{"unterminated string", `{"messageType":"ping`, ErrSyntax, -1},
		{"unterminated escape", `{"messageType":"ping\`, ErrSyntax, -1},
		{"control char in string", "{\"messageType\":\"pi\nng\"}", ErrSyntax, 18},
		{"invalid escape", `{"messageType":"p\xing"}`, ErrSyntax, 17},
		{"short unicode escape", `{"messageType":"\u12"}`, ErrSyntax, 16},
		{"bad hex escape", `{"messageType":"\u12g4"}`, ErrSyntax, 16},
		{"lone high surrogate", `{"messageType":"nack","version":"\ud83d"}`, ErrSyntax, -1},
		{"lone low surrogate", `{"messageType":"nack","version":"\ude00"}`, ErrSyntax, -1},
		{"high surrogate then non-low", `{"messageType":"nack","version":"\ud83d\u0041"}`, ErrSyntax, -1},
		{"invalid utf-8", "{\"messageType\":\"nack\",\"version\":\"\xff\"}", ErrSyntax, 33},
		{"invalid utf-8 after escape", "{\"messageType\":\"nack\",\"version\":\"\\n\xc3\"}", ErrSyntax, 33},
		{"invalid utf-8 in key", "{\"\xc3\x28\":1}", ErrSyntax, 2},
		{"invalid utf-8 in skipped value", "{\"x\":\"\xed\xa0\x80\",\"messageType\":\"ping\"}", ErrSyntax, 6},
		{"control char in skipped value", "{\"x\":\"\t\"}", ErrSyntax, 6},
		{"bad escape in skipped value", `{"x":"\q"}`, ErrSyntax, 6},
		{"leading zero", `{"x":01}`, ErrSyntax, 6},
		{"lone minus", `{"x":-}`, ErrSyntax, 6},
		{"bare fraction", `{"x":1.}`, ErrSyntax, 7},
		{"bare exponent", `{"x":1e}`, ErrSyntax, 7},
		{"plus sign", `{"x":+1}`, ErrSyntax, 5},
		{"bad literal", `{"x":tru}`, ErrSyntax, 5},
		{"literal prefix", `{"x":nulll}`, ErrSyntax, 9},
		{"too deep", deep(MaxDepth), ErrLimit, -1},
		{"too large", `{"x":"` + strings.Repeat("a", MaxClientMessageSize) + `"}`, ErrLimit, MaxClientMessageSize},
		{"too many updates", many.String(), ErrLimit, -1},
		{"too many broadcasts", bcasts.String(), ErrLimit, -1},

		{"unknown type", `{"messageType":"urgency","min":"low"}`, ErrUnknownType, 15},
		{"type is case sensitive", `{"messageType":"Hello"}`, ErrUnknownType, 15},
		{"type not a string", `{"messageType":5}`, ErrUnknownType, 15},
		{"type null", `{"messageType":null}`, ErrUnknownType, 15},
		{"no type", `{"uaid":"x"}`, ErrUnknownType, 0},
		{"key case matters", `{"MessageType":"ping"}`, ErrUnknownType, 0},

		{"hello uaid number", `{"messageType":"hello","uaid":5}`, ErrInvalidField, 30},
		{"hello broadcasts array", `{"messageType":"hello","broadcasts":[]}`, ErrInvalidField, 36},
		{"hello broadcast value number", `{"messageType":"hello","broadcasts":{"a":1}}`, ErrInvalidField, 36},
		{"register no channel", `{"messageType":"register"}`, ErrInvalidField, 15},
		{"register null channel", `{"messageType":"register","channelID":null}`, ErrInvalidField, 15},
		{"register channel number", `{"messageType":"register","channelID":1}`, ErrInvalidField, 38},
		{"register key object", `{"messageType":"register","channelID":"c","key":{}}`, ErrInvalidField, 48},
		{"unregister code string", `{"messageType":"unregister","channelID":"c","code":"200"}`, ErrInvalidField, 51},
		{"unregister code fraction", `{"messageType":"unregister","channelID":"c","code":200.0}`, ErrInvalidField, 51},
		{"unregister code exponent", `{"messageType":"unregister","channelID":"c","code":2e2}`, ErrInvalidField, 51},
		{"unregister code negative", `{"messageType":"unregister","channelID":"c","code":-1}`, ErrInvalidField, 51},
		{"unregister code too big", `{"messageType":"unregister","channelID":"c","code":4294967296}`, ErrInvalidField, 51},
		{"code beyond 64 bits", `{"messageType":"unregister","channelID":"c","code":99999999999999999999}`, ErrInvalidField, 51},
		{"code beyond int64", `{"messageType":"unregister","channelID":"c","code":9223372036854775808}`, ErrInvalidField, 51},
		{"ack no updates", `{"messageType":"ack"}`, ErrInvalidField, 15},
		{"ack null updates", `{"messageType":"ack","updates":null}`, ErrInvalidField, 15},
		{"ack updates object", `{"messageType":"ack","updates":{}}`, ErrInvalidField, 31},
		{"ack update not object", `{"messageType":"ack","updates":[{"channelID":"c","version":"v"},"x"]}`, ErrInvalidField, 64},
		{"ack update no version", `{"messageType":"ack","updates":[{"channelID":"c"}]}`, ErrInvalidField, 32},
		{"ack update null channel", `{"messageType":"ack","updates":[{"channelID":null,"version":"v"}]}`, ErrInvalidField, 32},
		{"ack update channel number", `{"messageType":"ack","updates":[{"channelID":1,"version":"v"}]}`, ErrInvalidField, 32},
		{"ack code too big", `{"messageType":"ack","updates":[{"channelID":"c","version":"v","code":65536}]}`, ErrInvalidField, 32},
		{"ack code negative", `{"messageType":"ack","updates":[{"channelID":"c","version":"v","code":-1}]}`, ErrInvalidField, 32},
		{"ack code string", `{"messageType":"ack","updates":[{"channelID":"c","version":"v","code":"100"}]}`, ErrInvalidField, 32},
		{"nack no version", `{"messageType":"nack","code":301}`, ErrInvalidField, 15},
		{"nack code too big", `{"messageType":"nack","version":"v","code":2147483648}`, ErrInvalidField, 43},
		{"nack code too small", `{"messageType":"nack","version":"v","code":-2147483649}`, ErrInvalidField, 43},
		{"broadcast_subscribe no broadcasts", `{"messageType":"broadcast_subscribe"}`, ErrInvalidField, 15},
		{"broadcast_subscribe string", `{"messageType":"broadcast_subscribe","broadcasts":"a"}`, ErrInvalidField, 50},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := decodeString(t, tt.in)
			if !errors.Is(err, tt.want) {
				t.Fatalf("DecodeClient(%.80q) = %v, want %v", tt.in, err, tt.want)
			}
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("error %T is not a *DecodeError", err)
			}
			if tt.offset >= 0 && de.Offset != tt.offset {
				t.Errorf("DecodeClient(%.80q): offset %d, want %d (%v)", tt.in, de.Offset, tt.offset, err)
			}
			if de.Error() == "" || de.Reason == "" {
				t.Errorf("empty error text")
			}
		})
	}
}

func TestDecodeClientDepthBoundary(t *testing.T) {
	// The top level is depth 1, so a value under it may nest MaxDepth-1 deep.
	in := `{"messageType":"ping","x":` + strings.Repeat("[", MaxDepth-1) + strings.Repeat("]", MaxDepth-1) + `}`
	if _, err := decodeString(t, in); err != nil {
		t.Fatalf("depth %d rejected: %v", MaxDepth, err)
	}
	in = `{"messageType":"ping","x":` + strings.Repeat(`{"a":`, MaxDepth-1) + "1" + strings.Repeat("}", MaxDepth-1) + `}`
	if _, err := decodeString(t, in); err != nil {
		t.Fatalf("depth %d rejected: %v", MaxDepth, err)
	}
	in = `{"messageType":"ping","x":` + strings.Repeat(`{"a":`, MaxDepth) + "1" + strings.Repeat("}", MaxDepth) + `}`
	if _, err := decodeString(t, in); !errors.Is(err, ErrLimit) {
		t.Fatalf("depth %d: %v, want ErrLimit", MaxDepth+1, err)
	}
	in = `{"messageType":"ping","x":"` + strings.Repeat("a", MaxClientMessageSize-len(`{"messageType":"ping","x":""}`)) + `"}`
	if len(in) != MaxClientMessageSize {
		t.Fatal("bad test")
	}
	if _, err := decodeString(t, in); err != nil {
		t.Fatalf("message of exactly MaxClientMessageSize: %v", err)
	}
}

// TestDecodeClientReuse checks that a ClientMessage reused across messages
// keeps nothing from the previous one.
func TestDecodeClientReuse(t *testing.T) {
	ack6 := `{"messageType":"ack","updates":[` + strings.Repeat(`{"channelID":"c","version":"v"},`, 5) + `{"channelID":"x","version":"y"}]}`
	var m ClientMessage
	for _, in := range []string{ffHelloAgain, ffAck, ack6, ffAck, ffRegister, ffPingEmpty, ffBroadcastSub, ffHelloAgain,
		ffNack, ffUnregister, ffHelloFirst, ack6, `{"messageType":"ack","updates":[]}`, ffBroadcastSub, ffPing} {
		if err := DecodeClient([]byte(in), &m); err != nil {
			t.Fatal(err)
		}
		fresh, _ := decodeString(t, in)
		if !reflect.DeepEqual(view(&m), view(fresh)) {
			t.Errorf("reused decode of %s\n got %+v\nwant %+v", in, view(&m), view(fresh))
		}
	}
	// A failed decode leaves nothing usable either.
	if err := DecodeClient([]byte(`{"messageType":"nope"}`), &m); err == nil || m.Type != MsgUnknown {
		t.Errorf("failed decode: err %v type %v", err, m.Type)
	}
	// A huge ack does not pin its array to a long-lived message.
	var huge strings.Builder
	huge.WriteString(`{"messageType":"ack","updates":[`)
	for i := 0; i < 3*keepCap; i++ {
		if i > 0 {
			huge.WriteByte(',')
		}
		huge.WriteString(`{"channelID":"c","version":"v"}`)
	}
	huge.WriteString(`]}`)
	if err := DecodeClient([]byte(huge.String()), &m); err != nil || len(m.Updates) != 3*keepCap {
		t.Fatalf("huge ack: %v, %d updates", err, len(m.Updates))
	}
	if err := DecodeClient([]byte(ffPing), &m); err != nil || cap(m.Updates) > keepCap {
		t.Errorf("after a huge ack: %v, kept capacity %d", err, cap(m.Updates))
	}
}

func TestClientMessageOwn(t *testing.T) {
	buf := []byte(`{"messageType":"ack","updates":[` + strings.Repeat(`{"channelID":"c\u00e9","version":"v"},`, 5) + `{"channelID":"x","version":"y"}]}`)
	var m ClientMessage
	if err := DecodeClient(buf, &m); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("%+v", view(&m))
	m.Own()
	for i := range buf {
		buf[i] = '#'
	}
	if got := fmt.Sprintf("%+v", view(&m)); got != want {
		t.Errorf("after Own and clobbering buf:\n got %s\nwant %s", got, want)
	}
	buf = []byte(ffHelloAgain)
	if err := DecodeClient(buf, &m); err != nil {
		t.Fatal(err)
	}
	m.Own()
	clear(buf)
	if m.UAID != "4f2d1e0c9b8a47d6a5b4c3d2e1f00a1b" || m.Broadcasts[0].Version != `"1234"` {
		t.Errorf("after Own: %+v", view(&m))
	}
	var empty ClientMessage
	empty.Own() // nothing to copy, must not panic
}

// TestZeroAllocDecode: a reused ClientMessage (warmed up by AllocsPerRun's
// first run) decodes every message without allocating.
func TestZeroAllocDecode(t *testing.T) {
	msgs := append([]string{}, exampleMessages...)
	msgs = append(msgs, `{"messageType":"ack","updates":[{"channelID":"a","version":"1"},{"channelID":"b","version":"2"},{"channelID":"c","version":"3"},{"channelID":"d","version":"4"}]}`)
	var m ClientMessage
	for _, in := range msgs {
		src := []byte(in)
		buf := make([]byte, len(src))
		allocs := testing.AllocsPerRun(100, func() {
			copy(buf, src) // escapes are unescaped in place
			if err := DecodeClient(buf, &m); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("DecodeClient(%s): %v allocs, want 0", in, allocs)
		}
	}
}

// TestAllocsFreshMessage: a ClientMessage declared per message (what a
// handler naturally writes) stays on the stack; only an ack's Updates or a
// broadcasts object allocate their slice.
func TestAllocsFreshMessage(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want float64
	}{
		{ffPingEmpty, 0}, {ffPing, 0}, {ffRegister, 0}, {ffRegisterNoKy, 0}, {ffUnregister, 0}, {ffNack, 0},
		{ffHelloFirst, 0}, {`{"messageType":"ack","updates":[]}`, 0},
		{ffAck, 1}, {ffHelloAgain, 1}, {ffBroadcastSub, 1},
	} {
		src := []byte(tt.in)
		buf := make([]byte, len(src))
		allocs := testing.AllocsPerRun(100, func() {
			var m ClientMessage
			copy(buf, src)
			if err := DecodeClient(buf, &m); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != tt.want {
			t.Errorf("DecodeClient(%s) into a fresh ClientMessage: %v allocs, want %v", tt.in, allocs, tt.want)
		}
	}
}

// TestDecodeClientAgainstEncodingJSON decodes messages written by
// encoding/json (in random key order, with random whitespace and unknown
// keys) and compares with the values they were made from.
func TestDecodeClientAgainstEncodingJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 5000; i++ {
		var kv []kvPair
		var want decoded
		want.Type = MessageType(1 + rng.IntN(int(MsgBroadcastSubscribe)))
		kv = append(kv, kvPair{"messageType", want.Type.String()})
		switch want.Type {
		case MsgHello:
			if rng.IntN(2) == 0 {
				want.UAID, want.HasUAID = validString(rng), true
				kv = append(kv, kvPair{"uaid", want.UAID})
			}
			if rng.IntN(2) == 0 {
				want.UseWebPush = rng.IntN(2) == 0
				kv = append(kv, kvPair{"use_webpush", want.UseWebPush})
			}
			if rng.IntN(2) == 0 {
				want.Broadcasts, want.HasBroadcasts = randBroadcasts(rng), true
				kv = append(kv, kvPair{"broadcasts", broadcastMap(want.Broadcasts)})
			}
			if rng.IntN(2) == 0 {
				kv = append(kv, kvPair{"channelIDs", []string{validString(rng), testChid}})
			}
		case MsgRegister:
			want.ChannelID = validString(rng)
			kv = append(kv, kvPair{"channelID", want.ChannelID})
			if rng.IntN(2) == 0 {
				want.Key = validString(rng)
				kv = append(kv, kvPair{"key", want.Key})
			}
		case MsgUnregister:
			want.ChannelID = validString(rng)
			kv = append(kv, kvPair{"channelID", want.ChannelID})
			if rng.IntN(2) == 0 {
				want.Code, want.HasCode = int64(rng.Uint32()), true
				kv = append(kv, kvPair{"code", want.Code})
			}
		case MsgAck:
			want.Updates = []AckUpdate{}
			var ups []map[string]any
			for n := rng.IntN(8); n > 0; n-- {
				u := AckUpdate{ChannelID: validString(rng), Version: validString(rng)}
				m := map[string]any{"channelID": u.ChannelID, "version": u.Version, "extra": []any{1.5, nil}}
				if rng.IntN(2) == 0 {
					u.Code, u.HasCode = rng.IntN(65536), true
					m["code"] = u.Code
				}
				want.Updates = append(want.Updates, u)
				ups = append(ups, m)
			}
			if ups == nil {
				ups = []map[string]any{}
			}
			kv = append(kv, kvPair{"updates", ups})
		case MsgNack:
			want.Version = validString(rng)
			kv = append(kv, kvPair{"version", want.Version})
			if rng.IntN(2) == 0 {
				want.Code, want.HasCode = int64(int32(rng.Uint32())), true
				kv = append(kv, kvPair{"code", want.Code})
			}
		case MsgBroadcastSubscribe:
			want.Broadcasts, want.HasBroadcasts = randBroadcasts(rng), true
			kv = append(kv, kvPair{"broadcasts", broadcastMap(want.Broadcasts)})
		}
		for n := rng.IntN(3); n > 0; n-- {
			kv = append(kv, kvPair{"x" + strconv.Itoa(n), map[string]any{"k": []any{validString(rng), 1e300, true, nil}}})
		}
		rng.Shuffle(len(kv), func(i, j int) { kv[i], kv[j] = kv[j], kv[i] })
		in := marshalObject(t, rng, kv)
		m, err := decodeString(t, in)
		if err != nil {
			t.Fatalf("DecodeClient(%s): %v", in, err)
		}
		got := view(m)
		want.Updates, want.Broadcasts = nilIfEmpty(want.Updates), nilIfEmpty(want.Broadcasts)
		sortBroadcasts(got.Broadcasts)
		sortBroadcasts(want.Broadcasts)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("DecodeClient(%s)\n got %+v\nwant %+v", in, got, want)
		}
	}
}

type kvPair struct {
	k string
	v any
}

// marshalObject writes an object with encoding/json's encoding of every key
// and value, in the given order, with random whitespace.
func marshalObject(t *testing.T, rng *rand.Rand, kv []kvPair) string {
	ws := func() string { return [...]string{"", " ", "\n\t", "\r\n  "}[rng.IntN(4)] }
	var b bytes.Buffer
	b.WriteString(ws() + "{")
	for i, p := range kv {
		if i > 0 {
			b.WriteString(ws() + ",")
		}
		k, err := json.Marshal(p.k)
		if err != nil {
			t.Fatal(err)
		}
		v, err := json.Marshal(p.v)
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString(ws())
		b.Write(k)
		b.WriteString(ws() + ":" + ws())
		b.Write(v)
	}
	b.WriteString(ws() + "}" + ws())
	return b.String()
}

func randBroadcasts(rng *rand.Rand) []Broadcast {
	seen := map[string]bool{}
	bs := []Broadcast{}
	for n := rng.IntN(7); n > 0; n-- {
		id := validString(rng)
		if seen[id] {
			continue
		}
		seen[id] = true
		bs = append(bs, Broadcast{id, validString(rng)})
	}
	return bs
}

func broadcastMap(bs []Broadcast) map[string]string {
	m := map[string]string{}
	for _, b := range bs {
		m[b.ID] = b.Version
	}
	return m
}

func sortBroadcasts(bs []Broadcast) {
	for i := 1; i < len(bs); i++ {
		for j := i; j > 0 && bs[j].ID < bs[j-1].ID; j-- {
			bs[j], bs[j-1] = bs[j-1], bs[j]
		}
	}
}
