package embedded

import (
	"encoding/binary"
	"maps"
	"testing"

	"github.com/autopush-go/autopush/storage"
	"github.com/google/uuid"
)

func TestCodecRoundTrip(t *testing.T) {
	m := storage.Message{CHID: uuid.New(), Version: "ver", Topic: "t", SortKey: 1<<63 + 5, TTL: 99,
		Data: "abc", Headers: map[string]string{"encoding": "aes128gcm", "crypto_key": "dh=x"}}
	for _, tracked := range []bool{true, false} {
		m.Tracked = tracked
		got, err := decodeMessage(encodeMessage(&m))
		if err != nil || got.CHID != m.CHID || got.Version != m.Version || got.Topic != m.Topic || got.Tracked != tracked ||
			got.SortKey != m.SortKey || got.TTL != m.TTL || got.Data != m.Data || !maps.Equal(got.Headers, m.Headers) {
			t.Fatalf("message round trip: %+v %v", got, err)
		}
	}
	rec := record{User: storage.User{RouterType: "fcm", RouterData: map[string]string{"a": "b"}, NodeID: "n",
		ConnectedAt: -3, LastConnect: 7, Cursor: 1 << 62}, ExpiresAt: 11}
	gotRec, err := decodeUser(encodeUser(&rec))
	if err != nil || gotRec.RouterType != "fcm" || gotRec.RouterData["a"] != "b" || gotRec.NodeID != "n" ||
		gotRec.ConnectedAt != -3 || gotRec.LastConnect != 7 || gotRec.Cursor != 1<<62 || gotRec.ExpiresAt != 11 {
		t.Fatalf("user round trip: %+v %v", gotRec, err)
	}
	// Every truncation is rejected, never a panic.
	enc := encodeMessage(&m)
	for i := range len(enc) {
		if _, err := decodeMessage(enc[:i]); err == nil {
			t.Fatalf("truncated message (%d of %d bytes) decoded", i, len(enc))
		}
	}
}

// v1Message is m as version 1 wrote it, before messages were tracked.
func v1Message(m *storage.Message) []byte {
	b := append([]byte{1}, m.CHID[:]...)
	b = binary.BigEndian.AppendUint64(b, m.SortKey)
	b = binary.AppendVarint(b, m.TTL)
	b = appendString(appendString(appendString(b, m.Version), m.Topic), m.Data)
	return appendMap(b, m.Headers)
}

// TestCodecReadsVersion1: messages stored before Tracked existed still
// decode, untracked, and a flags byte they never had is refused.
func TestCodecReadsVersion1(t *testing.T) {
	m := storage.Message{CHID: uuid.New(), Version: "v", Topic: "t", SortKey: 42, TTL: 60, Data: "d",
		Headers: map[string]string{"encoding": "aes128gcm"}}
	got, err := decodeMessage(v1Message(&m))
	if err != nil || got.Tracked || got.CHID != m.CHID || got.Version != "v" || got.Topic != "t" ||
		got.SortKey != 42 || got.TTL != 60 || got.Data != "d" || !maps.Equal(got.Headers, m.Headers) {
		t.Fatalf("version 1 message: %+v %v", got, err)
	}
	if _, err := decodeMessage(append(v1Message(&m), 1)); err == nil {
		t.Fatal("version 1 message with a trailing byte decoded")
	}
	m.Tracked = true
	enc := encodeMessage(&m)
	enc[len(enc)-1] |= 0x80
	if _, err := decodeMessage(enc); err == nil {
		t.Fatal("message with an unknown flag decoded")
	}
}

// FuzzDecodeMessage: the decoder never panics, and whatever it accepts
// survives an encode/decode round trip unchanged.
func FuzzDecodeMessage(f *testing.F) {
	m := storage.Message{CHID: uuid.New(), Version: "v", Topic: "t", SortKey: 9, TTL: 3, Data: "d",
		Headers: map[string]string{"encoding": "aesgcm", "encryption": "salt=x"}}
	m.Tracked = true
	enc := encodeMessage(&m)
	for i := range len(enc) + 1 {
		f.Add(enc[:i])
	}
	f.Add(v1Message(&m))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := decodeMessage(b)
		if err != nil {
			return
		}
		again, err := decodeMessage(encodeMessage(&got))
		if err != nil || again.CHID != got.CHID || again.SortKey != got.SortKey || again.TTL != got.TTL ||
			again.Version != got.Version || again.Topic != got.Topic || again.Data != got.Data || again.Tracked != got.Tracked || !maps.Equal(again.Headers, got.Headers) {
			t.Fatalf("round trip of an accepted message changed it: %+v -> %+v (%v)", got, again, err)
		}
	})
}

// FuzzDecodeUser: the decoder never panics on any input.
func FuzzDecodeUser(f *testing.F) {
	rec := record{User: storage.User{RouterType: "webpush", NodeID: "n", ConnectedAt: 1}, ExpiresAt: 2}
	enc := encodeUser(&rec)
	for i := range len(enc) + 1 {
		f.Add(enc[:i])
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, err := decodeUser(b); err == nil {
			if _, err := decodeUser(encodeUser(&got)); err != nil {
				t.Fatalf("accepted record does not re-decode: %v", err)
			}
		}
	})
}
