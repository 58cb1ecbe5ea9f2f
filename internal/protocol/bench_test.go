package protocol

import (
	"encoding/json"
	"testing"
)

// benchDecode decodes msg b.N times. The copy into buf each time is part
// of the measurement (a few ns) because escapes are unescaped in place.
func benchDecode(b *testing.B, msg string) {
	src := []byte(msg)
	buf := make([]byte, len(src))
	var m ClientMessage
	b.ReportAllocs()
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		copy(buf, src)
		if err := DecodeClient(buf, &m); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeAckFresh decodes into a new ClientMessage each time (a
// per-message local variable): the Updates slice is the one allocation.
func BenchmarkDecodeAckFresh(b *testing.B) {
	src := []byte(ffAck)
	buf := make([]byte, len(src))
	b.ReportAllocs()
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		var m ClientMessage
		copy(buf, src)
		if err := DecodeClient(buf, &m); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeAck(b *testing.B)        { benchDecode(b, ffAck) }
func BenchmarkDecodePing(b *testing.B)       { benchDecode(b, ffPingEmpty) }
func BenchmarkDecodePingTyped(b *testing.B)  { benchDecode(b, ffPing) }
func BenchmarkDecodeRegister(b *testing.B)   { benchDecode(b, ffRegister) }
func BenchmarkDecodeNack(b *testing.B)       { benchDecode(b, ffNack) }
func BenchmarkDecodeUnregister(b *testing.B) { benchDecode(b, ffUnregister) }
func BenchmarkDecodeHello(b *testing.B)      { benchDecode(b, ffHelloAgain) } // has escapes

// BenchmarkDecodeAckEncodingJSON is the baseline DecodeClient replaces.
func BenchmarkDecodeAckEncodingJSON(b *testing.B) {
	src := []byte(ffAck)
	b.ReportAllocs()
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		var m struct {
			MessageType string `json:"messageType"`
			Updates     []struct {
				ChannelID string `json:"channelID"`
				Version   string `json:"version"`
				Code      *int   `json:"code"`
			} `json:"updates"`
		}
		if err := json.Unmarshal(src, &m); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAppendNotification(b *testing.B) {
	n := testNotification()
	dst := make([]byte, 0, 1024)
	b.ReportAllocs()
	b.SetBytes(int64(len(AppendNotification(nil, n))))
	for b.Loop() {
		dst = AppendNotification(dst[:0], n)
	}
}

func BenchmarkAppendHelloReply(b *testing.B) {
	uaid := [16]byte{0x4f, 0x2d, 0x1e}
	changed := []Broadcast{{"remote-settings/monitor_changes", `"1234"`}}
	dst := make([]byte, 0, 1024)
	b.ReportAllocs()
	for b.Loop() {
		dst = AppendHelloReply(dst[:0], uaid, 200, changed, nil)
	}
}

func BenchmarkAppendRegisterReply(b *testing.B) {
	dst := make([]byte, 0, 1024)
	const endpoint = "https://updates.push.services.mozilla.com/wpush/v2/gAAAAABmX2Z0aWxlX3ZlcnNpb24tbG9uZ2VyLXRoYW4tdGhpcw"
	b.ReportAllocs()
	for b.Loop() {
		dst = AppendRegisterReply(dst[:0], testChid, 200, endpoint)
	}
}
