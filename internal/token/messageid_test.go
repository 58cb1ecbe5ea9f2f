package token

import (
	"crypto/rand"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/autopush-go/autopush/internal/errno"
)

// Reference-format message ids, made like the endpoint vectors (Python
// cryptography.fernet, fixed clock and IV) over autopush-rs's plaintexts
// (MessageId::encrypt): "01:{uaid hex}:{chid hex}:{topic}" and
// "02:{uaid hex}:{chid hex}:{ms timestamp}", padded as it leaves them.
const (
	testRef01 = "gAAAAABlU_EAAAECAwQFBgcICQoLDA0OD4PM3AZJeSdIeQWXdMEAHN1IlLevyEfpcGzipddUUF5iDO3mfE9InKv_JZ71PdHXXxsrWODTvwrMoHlFi9I0s_6H0hSsgqh4FEn09RdIU1SMQwWYjyMu7yQfwuzjp-Or37fHBuJJHYfKHmNqpUokO78="
	testRef02 = "gAAAAABlU_EAAAECAwQFBgcICQoLDA0OD8S10eaWREwc6Z1Cts0CdQ5HZy0DWJt9SrsJOcHcIJ_pA8Q3pgYYLPrgCd33W15uAXcNcfAwoxm3YmIk92SRpEOjlBhdv3gV9FVqtkSbYIkgiz1F-6H3H2b2pYZaSZ6R4oeRBiCfEePZTMetsoh41h5ZjjdZ_obeaevRyOMpur9m"
)

func TestParseMessageIDReference(t *testing.T) {
	k := testKeys(t, testKey, false)
	uaid, chid := testIDs()
	id, err := k.ParseMessageID(testRef01)
	if err != nil || id != (MessageID{UAID: uaid, CHID: chid, Topic: "new_mail"}) {
		t.Fatalf("01: %+v %v", id, err)
	}
	// Unpadded, as a client might send it back.
	if id2, err := k.ParseMessageID(strings.TrimRight(testRef01, "=")); err != nil || id2 != id {
		t.Fatalf("01 unpadded: %+v %v", id2, err)
	}
	id, err = k.ParseMessageID(testRef02)
	if err != nil || id != (MessageID{UAID: uaid, CHID: chid, SortKey: 1700000000123 * 1_000_000}) {
		t.Fatalf("02: %+v %v", id, err)
	}
}

// The reference parser's other cases, over plaintexts sealed here.
func TestParseMessageIDReferenceForms(t *testing.T) {
	k := testKeys(t, testKey, false)
	const uhex, c = "deadbeef0000400080000123456789ab", "0123456789ab4cde8f0123456789abcd"
	uaid, chid := testIDs()
	for plain, want := range map[string]*MessageID{
		"01:" + uhex + ":" + c + ":t":                                      {UAID: uaid, CHID: chid, Topic: "t"},
		"01:" + uhex + ":" + c + ":a-b_C9==":                               {UAID: uaid, CHID: chid, Topic: "a-b_C9=="},
		"01:" + testUAID + ":" + testCHID + ":t":                           {UAID: uaid, CHID: chid, Topic: "t"}, // hyphenated: Uuid::parse_str takes it
		"01:" + strings.ToUpper(uhex) + ":" + c + ":t":                     {UAID: uaid, CHID: chid, Topic: "t"},
		"02:" + uhex + ":" + c + ":1":                                      {UAID: uaid, CHID: chid, SortKey: 1_000_000},
		"01:" + uhex + ":" + c + ":":                                       nil, // empty topic
		"01:" + uhex + ":" + c + ":" + strings.Repeat("x", 33):             nil,
		"01:" + uhex + ":" + c + ":a=b":                                    nil,
		"01:" + uhex + ":" + c + ":t:u":                                    nil,
		"02:" + uhex + ":" + c + ":0":                                      nil,
		"02:" + uhex + ":" + c + ":-1":                                     nil,
		"02:" + uhex + ":" + c + ":18446744073710":                         nil, // ×10⁶ overflows
		"02:" + uhex + ":" + c + ":x":                                      nil,
		"03:" + uhex + ":" + c + ":1":                                      nil,
		"01:" + uhex[1:] + ":" + c + ":t":                                  nil,
		"01:" + uhex + ":" + c[:31] + "g:t":                                nil,
		"":                                                                 nil,
		string([]byte{idBinary}):                                           nil,
		string(append([]byte{idBinary}, make([]byte, 40)...)):              nil, // no topic, SortKey 0
		string(append([]byte{idBinary}, make([]byte, 41+33)...)):           nil,
		string(append(append([]byte{idBinary}, make([]byte, 40)...), ':')): nil,
	} {
		tok, err := k.Encrypt([]byte(plain))
		if err != nil {
			t.Fatal(err)
		}
		id, err := k.ParseMessageID(tok)
		switch {
		case want == nil && err == nil:
			t.Errorf("%q: accepted %+v", plain, id)
		case want != nil && (err != nil || id != *want):
			t.Errorf("%q: %+v %v", plain, id, err)
		case err != nil && err != ErrMessageIDFormat:
			t.Errorf("%q: %v", plain, err)
		}
	}
}

func TestMessageIDRoundTrip(t *testing.T) {
	k, _ := ParseKeys(GenerateKey())
	var uaid, chid [16]byte
	rand.Read(uaid[:])
	rand.Read(chid[:])
	for _, id := range []MessageID{
		{UAID: uaid, CHID: chid, SortKey: uint64(time.Now().UnixNano())},
		{UAID: uaid, CHID: chid, SortKey: 1},
		{UAID: uaid, CHID: chid, SortKey: ^uint64(0)},
		{UAID: uaid, CHID: chid, Topic: "new_mail", SortKey: uint64(time.Now().UnixNano())},
		{UAID: uaid, CHID: chid, Topic: strings.Repeat("Z", 30) + "==", SortKey: 7},
		{UAID: uaid, CHID: chid, Topic: "t"}, // any version of the topic
	} {
		s, err := k.MakeMessageID(id)
		if err != nil {
			t.Fatalf("%+v: %v", id, err)
		}
		if strings.ContainsAny(s, "=+/") || len(s) > 183 {
			t.Errorf("%+v: %q", id, s)
		}
		got, err := k.ParseMessageID(s)
		if err != nil || got != id {
			t.Errorf("%+v: got %+v, %v", id, got, err)
		}
	}
	for _, id := range []MessageID{
		{UAID: uaid, CHID: chid},
		{UAID: uaid, CHID: chid, Topic: strings.Repeat("a", 33), SortKey: 1},
		{UAID: uaid, CHID: chid, Topic: "a:b", SortKey: 1},
		{UAID: uaid, CHID: chid, Topic: "=", SortKey: 1},
		{UAID: uaid, CHID: chid, Topic: "é", SortKey: 1},
	} {
		if s, err := k.MakeMessageID(id); err != ErrMessageIDInput {
			t.Errorf("%+v: %q %v", id, s, err)
		}
	}
}

func TestParseMessageIDErrors(t *testing.T) {
	k := testKeys(t, testKey, false)
	other := testKeys(t, GenerateKey(), false)
	uaid, chid := testIDs()
	foreign, _ := other.MakeMessageID(MessageID{UAID: uaid, CHID: chid, SortKey: 1})
	for s, want := range map[string]*MessageIDError{
		"":                                    ErrMessageIDDecrypt,
		"!!!!":                                ErrMessageIDEncoding,
		strings.Repeat("A", 300):              ErrMessageIDEncoding,
		foreign:                               ErrMessageIDDecrypt,
		testRef01[:100]:                       ErrMessageIDDecrypt,
		testRef02[:50] + "A" + testRef02[51:]: ErrMessageIDDecrypt,
		testV1:                                ErrMessageIDFormat, // an endpoint token is no message id
	} {
		if id, err := k.ParseMessageID(s); err != want {
			t.Errorf("%.40q: %+v %v; want %v", s, id, err, want)
		}
	}
	if h := ErrMessageIDDecrypt.HTTPError(); h.Status != 400 || h.Errno != errno.None || h.Message != "Invalid message ID" {
		t.Errorf("%+v", h)
	}
}

// Key rotation applies to message ids as to endpoints.
func TestMessageIDRotation(t *testing.T) {
	oldK, _ := ParseKeys(testOldKey)
	rotated, _ := ParseKeys(testKey + "," + testOldKey)
	uaid, chid := testIDs()
	id := MessageID{UAID: uaid, CHID: chid, Topic: "x", SortKey: 5}
	s, _ := oldK.MakeMessageID(id)
	if got, err := rotated.ParseMessageID(s); err != nil || got != id {
		t.Fatalf("%+v %v", got, err)
	}
}

func FuzzParseMessageID(f *testing.F) {
	f.Add(testRef01)
	f.Add(testRef02)
	f.Add(strings.TrimRight(testRef01, "="))
	f.Add("")
	k := testKeys(f, testKey, false)
	uaid, chid := testIDs()
	for _, id := range []MessageID{{UAID: uaid, CHID: chid, SortKey: 42}, {UAID: uaid, CHID: chid, Topic: "abc", SortKey: 9}} {
		s, _ := k.MakeMessageID(id)
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := k.ParseMessageID(s)
		if err != nil {
			if _, ok := err.(*MessageIDError); !ok {
				t.Fatalf("error type %T", err)
			}
			return
		}
		s2, err := k.MakeMessageID(id)
		if err != nil {
			t.Fatalf("accepted %+v does not re-encode: %v", id, err)
		}
		if id2, err := k.ParseMessageID(s2); err != nil || id2 != id {
			t.Fatalf("round trip: %+v -> %+v %v", id, id2, err)
		}
	})
}

// Fuzzing decrypts, so random input almost never reaches the plaintext
// parsers: this target feeds them directly.
func FuzzMessageIDPlaintext(f *testing.F) {
	f.Add([]byte("01:deadbeef0000400080000123456789ab:0123456789ab4cde8f0123456789abcd:t"))
	f.Add([]byte("02:deadbeef0000400080000123456789ab:0123456789ab4cde8f0123456789abcd:1700000000123"))
	f.Add(append([]byte{idBinary}, make([]byte, 44)...))
	k := testKeys(f, testKey, false)
	f.Fuzz(func(t *testing.T, plain []byte) {
		tok, err := k.Encrypt(plain)
		if err != nil {
			t.Fatal(err)
		}
		id, err := k.ParseMessageID(base64.RawURLEncoding.EncodeToString(mustDecodeB64(t, tok)))
		if err != nil {
			// Too long to be an id is refused before decryption.
			if err != ErrMessageIDFormat && !(err == ErrMessageIDEncoding && len(plain) > maxRefPlainLen) {
				t.Fatalf("%d bytes: %v", len(plain), err)
			}
			return
		}
		s2, err := k.MakeMessageID(id)
		if err != nil {
			t.Fatalf("accepted %+v does not re-encode: %v", id, err)
		}
		if id2, err := k.ParseMessageID(s2); err != nil || id2 != id {
			t.Fatalf("round trip: %+v -> %+v %v", id, id2, err)
		}
	})
}

func mustDecodeB64(t *testing.T, s string) []byte {
	b, err := base64.URLEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func BenchmarkParseMessageID(b *testing.B) {
	k := testKeys(b, testKey, false)
	uaid, chid := testIDs()
	s, _ := k.MakeMessageID(MessageID{UAID: uaid, CHID: chid, Topic: "new_mail", SortKey: 1700000000123456789})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := k.ParseMessageID(s); err != nil {
			b.Fatal(err)
		}
	}
}
