package pushcrypto

import (
	"strings"
	"testing"
	"time"

	"github.com/autopush-go/autopush/internal/vapid"
)

// The signer's tokens must pass our verifier (which follows RFC 8292 and
// the reference): both forms of the header, the v2 key binding, and a key
// reloaded from its private scalar signs as the same identity.
func TestVAPIDSignerRoundTrip(t *testing.T) {
	s, err := NewVAPIDSigner("mailto:ops@example.com")
	if err != nil {
		t.Fatal(err)
	}
	tok, err := s.Token("https://push.example.com", time.Now().Add(12*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	v := &vapid.Verifier{}
	res, err := v.Verify(s.Authorization(tok), "", "https://push.example.com/wpush")
	if err != nil {
		t.Fatalf("verify vapid form: %v", err)
	}
	if res.Claims.Sub != "mailto:ops@example.com" || string(res.PublicKey[:]) != string(s.PublicKey()) {
		t.Fatalf("claims %+v, key mismatch %v", res.Claims, string(res.PublicKey[:]) != string(s.PublicKey()))
	}
	if _, err := v.Verify("WebPush "+tok, "p256ecdsa="+s.Public, "https://push.example.com"); err != nil {
		t.Fatalf("verify WebPush form: %v", err)
	}
	if _, err := v.Verify(s.Authorization(tok), "", "https://other.example.com"); err == nil {
		t.Fatal("token for another audience accepted")
	}

	again, err := ParseVAPIDSigner(s.Private()+"=", "")
	if err != nil {
		t.Fatal(err)
	}
	if again.Public != s.Public {
		t.Fatalf("reloaded public key %s, want %s", again.Public, s.Public)
	}
	tok2, err := again.Token("https://push.example.com", time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	res2, err := (&vapid.Verifier{}).Verify(again.Authorization(tok2), "", "https://push.example.com")
	if err != nil || res2.Claims.Sub != "" {
		t.Fatalf("reloaded signer: %v, sub %q", err, res2.Claims.Sub)
	}
}

func TestParseVAPIDSignerRejects(t *testing.T) {
	for _, in := range []string{"", "abc", strings.Repeat("A", 43) + "!", strings.Repeat("_", 43)} {
		if _, err := ParseVAPIDSigner(in, ""); err == nil {
			t.Errorf("ParseVAPIDSigner(%q) accepted", in)
		}
	}
}
