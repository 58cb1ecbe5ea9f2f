package protocol

// Fixtures and helpers the tests of this package share (decode_client,
// encode, fuzz and bench tests), MessageType and the error texts.

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/autopush-go/autopush/internal/jsonscan"
)

// Messages as a real Firefox sends them (observed with Firefox 153).
const (
	ffHelloFirst   = `{"messageType":"hello","broadcasts":{},"use_webpush":true}`
	ffHelloAgain   = `{"messageType":"hello","broadcasts":{"remote-settings/monitor_changes":"\"1234\""},"use_webpush":true,"uaid":"4f2d1e0c9b8a47d6a5b4c3d2e1f00a1b","channelIDs":["5a7c26a2-44b8-4b8c-8c4a-7e1c1d29a0b1"]}`
	ffRegister     = `{"messageType":"register","channelID":"5a7c26a2-44b8-4b8c-8c4a-7e1c1d29a0b1","key":"BNr_X8Qz4xyl7Nq3BU2hKDZ4ElM5jr1GnCaR6xPN0pqBj8jvG6ogJ8E4nHCtR-vHxQvC_PjyAA5VjKRZBeiBUUY="}`
	ffRegisterNoKy = `{"messageType":"register","channelID":"5a7c26a2-44b8-4b8c-8c4a-7e1c1d29a0b1"}`
	ffUnregister   = `{"messageType":"unregister","channelID":"5a7c26a2-44b8-4b8c-8c4a-7e1c1d29a0b1","code":200}`
	ffAck          = `{"messageType":"ack","updates":[{"channelID":"5a7c26a2-44b8-4b8c-8c4a-7e1c1d29a0b1","version":"gAAAAABmX2Z0aWxlX3ZlcnNpb24","code":100}]}`
	ffNack         = `{"messageType":"nack","version":"gAAAAABmX2Z0aWxlX3ZlcnNpb24","code":301}`
	ffPingEmpty    = `{}`
	ffPing         = `{"messageType":"ping"}`
	ffBroadcastSub = `{"messageType":"broadcast_subscribe","broadcasts":{"remote-settings/monitor_changes":"\"1234\""}}`
)

const testChid = "5a7c26a2-44b8-4b8c-8c4a-7e1c1d29a0b1"

// exampleMessages are every example above, for tests, fuzz seeds and
// benchmarks.
var exampleMessages = []string{
	ffHelloFirst, ffHelloAgain, ffRegister, ffRegisterNoKy, ffUnregister,
	ffAck, ffNack, ffPingEmpty, ffPing, ffBroadcastSub,
}

// decoded is the comparable view of a ClientMessage.
type decoded struct {
	Type          MessageType
	UAID          string
	HasUAID       bool
	UseWebPush    bool
	Broadcasts    []Broadcast
	HasBroadcasts bool
	ChannelID     string
	Key           string
	Code          int64
	HasCode       bool
	Version       string
	Updates       []AckUpdate
}

// view returns m's fields, empty slices as nil (whether an empty slice is
// nil depends on the capacity m had before, which is not part of the result).
func view(m *ClientMessage) decoded {
	return decoded{
		Type: m.Type, UAID: m.UAID, HasUAID: m.HasUAID, UseWebPush: m.UseWebPush,
		Broadcasts: nilIfEmpty(m.Broadcasts), HasBroadcasts: m.HasBroadcasts,
		ChannelID: m.ChannelID, Key: m.Key, Code: m.Code, HasCode: m.HasCode,
		Version: m.Version, Updates: nilIfEmpty(m.Updates),
	}
}

func nilIfEmpty[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return s
}

func decodeString(t testing.TB, in string) (*ClientMessage, error) {
	t.Helper()
	m := new(ClientMessage)
	err := DecodeClient([]byte(in), m)
	return m, err
}

// fixUTF8 is what encoding/json decodes an invalid string to: each invalid
// byte replaced by U+FFFD.
func fixUTF8(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b.WriteRune(utf8.RuneError)
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// randString returns strings that exercise escaping: ASCII, quotes,
// backslashes, control characters, multi-byte runes, U+2028, invalid bytes.
func randString(rng *rand.Rand) string {
	pieces := []string{"a", "Z", "0", "-", "_", "=", "\"", "\\", "/", "\n", "\t", "\x00", "\x1f", "\x7f", "é", "€", "😀",
		"\u2028", "\u2029", "\ufffd", "\xff", "\xc3", "\xed\xa0\x80", "<", ">", "&", " "}
	var b strings.Builder
	for n := rng.IntN(12); n > 0; n-- {
		b.WriteString(pieces[rng.IntN(len(pieces))])
	}
	return b.String()
}

// validString is randString without invalid UTF-8 (what a client can send).
func validString(rng *rand.Rand) string {
	return strings.ToValidUTF8(randString(rng), "?")
}

func TestMessageTypeString(t *testing.T) {
	for typ := MsgHello; typ <= MsgBroadcastSubscribe; typ++ {
		if lookupType(typ.String()) != typ {
			t.Errorf("%d: %q does not map back", typ, typ.String())
		}
	}
	if MsgUnknown.String() != "" || MessageType(99).String() != "MessageType(99)" {
		t.Error("String of unknown types")
	}
}

// TestErrorTexts: the category texts reach clients (the websocket close
// reason, the node API's 400 body), and the scanner's categories and error
// type are protocol's own, so errors.Is and errors.As work with either name.
func TestErrorTexts(t *testing.T) {
	for err, want := range map[error]string{
		ErrSyntax:       "webpush: malformed JSON",
		ErrUnknownType:  "webpush: missing or unknown messageType",
		ErrInvalidField: "webpush: missing or invalid field",
		ErrLimit:        "webpush: message exceeds a limit",
	} {
		if err.Error() != want {
			t.Errorf("%q, want %q", err, want)
		}
	}
	for in, want := range map[string]string{
		`{"x":tru}`:                         "webpush: malformed JSON at offset 5: invalid literal",
		`{"messageType":"ack","updates":5}`: "webpush: missing or invalid field at offset 31: ack: invalid updates",
		`{"messageType":"nope"}`:            "webpush: missing or unknown messageType at offset 15: unknown messageType",
	} {
		_, err := decodeString(t, in)
		var de *DecodeError
		var sde *jsonscan.DecodeError
		if err == nil || err.Error() != want || !errors.As(err, &de) || !errors.As(err, &sde) || de != sde {
			t.Errorf("DecodeClient(%s) = %v, want %s", in, err, want)
		}
	}
	if _, err := decodeString(t, `{"x":"\q"}`); !errors.Is(err, jsonscan.ErrSyntax) || !errors.Is(err, ErrSyntax) {
		t.Errorf("scanner error %v is not ErrSyntax under both names", err)
	}
}
