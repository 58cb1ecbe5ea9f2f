package endpointdiag_test

import (
	"crypto/ecdh"
	"crypto/rand"
	"errors"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/autopush-go/autopush/internal/endpointdiag"
	"github.com/autopush-go/autopush/internal/protocol"
	"github.com/autopush-go/autopush/internal/token"
)

const key = "cw_0x689RpI-jtRR7oE8h_eQsKImvJapLeSbXpwF4e4="

func keys(t testing.TB) *token.Keys {
	k, err := token.ParseKeys(key)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestParse: a UAID in either form, an endpoint URL of either version,
// a bare token (v1, or v2/TOKEN); anything else is an ErrInput naming
// what is wrong.
func TestParse(t *testing.T) {
	k := keys(t)
	uaid, chid := uuid.New(), uuid.New()
	v1, err := k.MakeEndpoint("https://push.example.com", uaid, chid, nil)
	if err != nil {
		t.Fatal(err)
	}
	vapid, _ := ecdh.P256().GenerateKey(rand.Reader)
	v2, err := k.MakeEndpoint("https://push.example.com", uaid, chid, vapid.PublicKey().Bytes())
	if err != nil {
		t.Fatal(err)
	}
	tok1 := v1[strings.LastIndex(v1, "/")+1:]
	tok2 := v2[strings.LastIndex(v2, "/")+1:]
	for in, wantVersion := range map[string]int{
		protocol.FormatUAID(uaid): 0, uaid.String(): 0, v1: 1, v2: 2, tok1: 1, "v2/" + tok2: 2, " " + v1 + "\n": 1,
	} {
		q, err := endpointdiag.Parse(k, in)
		switch {
		case err != nil:
			t.Errorf("%q: %v", in, err)
		case q.UAID != uaid:
			t.Errorf("%q: uaid %s, want %s", in, q.UAID, uaid)
		case wantVersion == 0 && q.Endpoint != nil, wantVersion > 0 && (q.Endpoint == nil || q.Endpoint.Version != wantVersion || q.Endpoint.CHID != chid):
			t.Errorf("%q: %+v, want version %d of channel %s", in, q.Endpoint, wantVersion, chid)
		}
	}
	for _, in := range []string{"", "https://x/wpush/v1/", "https://x/wpush/v1/garbage", "v3/" + tok1, "0123"} {
		if _, err := endpointdiag.Parse(k, in); !errors.Is(err, endpointdiag.ErrInput) {
			t.Errorf("%q: %v, want an ErrInput", in, err)
		}
	}
}

// FuzzParse: any input parses or is an ErrInput, never a panic; what
// parses as a UAID formats back to the same UAID.
func FuzzParse(f *testing.F) {
	k := keys(f)
	v1, _ := k.MakeEndpoint("https://push.example.com", uuid.New(), uuid.New(), nil)
	for _, s := range []string{v1, "v2/abc", protocol.FormatUAID(uuid.New()), uuid.NewString(), "/wpush/", "x/y/z"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		q, err := endpointdiag.Parse(k, s)
		if err != nil {
			if !errors.Is(err, endpointdiag.ErrInput) {
				t.Fatalf("%q: %v is not an ErrInput", s, err)
			}
			return
		}
		if q.Endpoint == nil {
			if back, ok := protocol.ParseUAID(protocol.FormatUAID(q.UAID)); !ok || back != q.UAID {
				t.Fatalf("%q: uaid %s does not round-trip", s, q.UAID)
			}
		} else if q.Endpoint.UAID != q.UAID {
			t.Fatalf("%q: query uaid %s, endpoint's %x", s, q.UAID, q.Endpoint.UAID)
		}
	})
}
