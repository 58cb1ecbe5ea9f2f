package bridgeauth

import (
	"testing"

	"github.com/google/uuid"
)

// The reference's own test vector: a secret its Python predecessor made,
// which autopush-rs still verifies.
const (
	refKey    = "HJVPy4ZwF4Yz_JdvXTL8hRcwIhv742vC60Tg5Ycrvw8="
	refUAID   = "729e5104f5f04abc9196085340317dea"
	refSecret = "f694963453adf5dedcc379bbdd6900d692b6e09f1c91f44169bfcd2f941bf36c"
)

func TestSecretMatchesReference(t *testing.T) {
	uaid := uuid.MustParse(refUAID)
	if got := Secret(refKey, uaid); got != refSecret {
		t.Fatalf("Secret = %s, want the reference's %s", got, refSecret)
	}
}

func TestVerify(t *testing.T) {
	uaid := uuid.MustParse(refUAID)
	other := uuid.MustParse("00000000-0000-4000-8000-000000000001")
	second := "a-second-key-for-rotation"
	cases := []struct {
		name   string
		keys   []string
		uaid   uuid.UUID
		secret string
		want   bool
	}{
		{"first key", []string{refKey, second}, uaid, refSecret, true},
		{"second key", []string{second, refKey}, uaid, refSecret, true},
		{"other uaid", []string{refKey}, other, refSecret, false},
		{"unknown key", []string{second}, uaid, refSecret, false},
		{"no keys", nil, uaid, refSecret, false},
		{"upper case", []string{refKey}, uaid, "F694963453ADF5DEDCC379BBDD6900D692B6E09F1C91F44169BFCD2F941BF36C", false},
		{"truncated", []string{refKey}, uaid, refSecret[:63], false},
		{"longer", []string{refKey}, uaid, refSecret + "0", false},
		{"empty", []string{refKey}, uaid, "", false},
		{"zeros of the right length", []string{refKey}, uaid, string(make([]byte, 64)), false},
	}
	for _, c := range cases {
		if got := Verify(c.keys, c.uaid, c.secret); got != c.want {
			t.Errorf("%s: Verify = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestFromAuthorization(t *testing.T) {
	cases := []struct {
		header, secret string
		ok             bool
	}{
		{"Bearer abc", "abc", true},
		{"bearer abc", "abc", true},
		{"WebPush abc", "abc", true},
		{"webpush abc", "abc", true},
		{"Basic abc", "", false},
		{"Bearer", "", false},
		{"Bearer ", "", false},
		{"", "", false},
		{"vapid t=x,k=y", "", false},
	}
	for _, c := range cases {
		s, ok := FromAuthorization(c.header)
		if s != c.secret || ok != c.ok {
			t.Errorf("FromAuthorization(%q) = %q, %v; want %q, %v", c.header, s, ok, c.secret, c.ok)
		}
	}
}
