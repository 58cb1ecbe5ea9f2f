package receipts

import (
	"crypto/rand"
	"strings"
	"testing"

	"github.com/autopush-go/autopush/storage"
)

// TestParseID: a subscription's URL, its path or its bare id name it;
// anything else names nothing.
func TestParseID(t *testing.T) {
	a := New(Config{Enabled: true, EndpointURL: "https://push.example/"}, nil, nil, nil)
	var id storage.ReceiptSubID
	rand.Read(id[:])
	u := a.URL(id)
	if !strings.HasPrefix(u, "https://push.example/receipts/") {
		t.Fatalf("URL %q", u)
	}
	for _, v := range []string{u, strings.TrimPrefix(u, "https://push.example"), u[strings.LastIndexByte(u, '/')+1:]} {
		if got, ok := parseID(v); !ok || got != id {
			t.Errorf("parseID(%q) = %x %v, want %x", v, got, ok, id)
		}
	}
	for _, v := range []string{"", "/", u + "x", u[:len(u)-1], u + "/", strings.ReplaceAll(u, "/receipts/", "/receipts/+")} {
		if _, ok := parseID(v); ok {
			t.Errorf("parseID(%q) accepted", v)
		}
	}
	if a.Link() != `<https://push.example/receipts>; rel="urn:ietf:params:push:receipt"` {
		t.Errorf("Link %q", a.Link())
	}
	if off := New(Config{EndpointURL: "https://push.example"}, nil, nil, nil); off.Link() != "" {
		t.Errorf("receipts off: Link %q", off.Link())
	}
}

// FuzzParseID: a Push-Receipt or route parameter never panics, and what
// it accepts is the id its URL names.
func FuzzParseID(f *testing.F) {
	a := New(Config{Enabled: true, EndpointURL: "https://push.example"}, nil, nil, nil)
	f.Add("https://push.example/receipts/AAAAAAAAAAAAAAAAAAAAAA")
	f.Add("AAAAAAAAAAAAAAAAAAAAA=")
	f.Add("/receipts/%2F")
	f.Fuzz(func(t *testing.T, v string) {
		id, ok := parseID(v)
		if !ok {
			return
		}
		if again, ok2 := parseID(a.URL(id)); !ok2 || again != id {
			t.Fatalf("parseID(%q) = %x, whose URL does not name it", v, id)
		}
	})
}
