package receipts

import (
	"context"
	"crypto/rand"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	et "github.com/autopush-go/autopush/engine/enginetest"
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

// TestWebhookGuards: by default a webhook must be https and is never
// called on a loopback or private address (checked at connect time;
// TestNotPublic has every range); no
// redirect is followed; receipt-webhook-insecure lifts the first two.
func TestWebhookGuards(t *testing.T) {
	var hit atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hit.Add(1)
		http.Redirect(w, r, "/elsewhere", http.StatusFound)
	}))
	defer srv.Close()
	strict := New(Config{Enabled: true, Webhooks: true}, nil, nil, nil)
	if err := strict.checkWebhook(srv.URL); err == nil {
		t.Fatal("an http webhook accepted without receipt-webhook-insecure")
	}
	if err := strict.checkWebhook("https://app.example/r"); err != nil {
		t.Fatalf("an https webhook refused: %v", err)
	}
	if err := New(Config{Enabled: true}, nil, nil, nil).checkWebhook("https://app.example/r"); err == nil {
		t.Fatal("a webhook accepted with webhooks off")
	}
	if _, err := hookClient(false, time.Second).Get(srv.URL); !errors.Is(err, errNotPublic) {
		t.Fatalf("the strict client called a loopback address: %v", err)
	}
	if n := hit.Load(); n != 0 {
		t.Fatalf("the loopback server was reached %d times", n)
	}
	resp, err := hookClient(true, time.Second).Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if n := hit.Load(); resp.StatusCode != http.StatusFound || n != 1 {
		t.Fatalf("status %d after %d calls: want the redirect itself, not followed", resp.StatusCode, n)
	}
	if err := New(Config{Enabled: true, Webhooks: true, WebhookInsecure: true}, nil, nil, nil).checkWebhook(srv.URL); err != nil {
		t.Fatalf("insecure: an http webhook refused: %v", err)
	}
}

// TestWebhookGrammar: a webhook is taken when it is an absolute https
// URL without credentials, in the grammar docs/openapi.yaml's pattern
// states (WebhookRest), and refused otherwise, also where net/url alone
// would take it (a space, a '"' in the host, an incomplete escape in a
// query, an upper-case scheme) or would read another host than written.
func TestWebhookGrammar(t *testing.T) {
	a := New(Config{Enabled: true, Webhooks: true}, nil, nil, nil)
	for _, ok := range []string{
		"https://app.example/r", "https://app.example", "https://app.example:8443/a/b;c=d?x=1&y=%41/?#frag/?",
		"https://1.2.3.4/r", "https://[2606:4700::1]:443/r", "https://a.b-c_d~e!$&'()*+,;=/p@q:r",
	} {
		if err := a.checkWebhook(ok); err != nil {
			t.Errorf("%q refused: %v", ok, err)
		}
	}
	for _, bad := range []string{
		"", "https:", "https://", "https:///r", "https://:443/r", "https://u:p@app.example/r", "https://u@app.example/r",
		"http://app.example/r", "HTTPS://app.example/r", "ftp://app.example/r", "app.example/r", "//app.example/r",
		"https://app example/r", "https://app.example/r s", `https://app".example/r`, "https://app.example/r?q=%zz",
		"https://app.example/r#%4", "https://app%2eexample/r", "https://[1:2]/r", "https://[v1.x]/r", "https://app.example/é",
		"https://app.example/r#a#b", "https://app.example:80x/r", "https://app.example/" + strings.Repeat("r", storage.MaxWebhookLen),
	} {
		if err := a.checkWebhook(bad); err == nil {
			t.Errorf("%q taken", bad)
		}
	}
}

// FuzzWebhook: a webhook is never taken unless net/url reads it as
// written: scheme https, no credentials, and the host it would call the
// very text between "//" and the path, query or fragment.
func FuzzWebhook(f *testing.F) {
	for _, s := range []string{"https://app.example/r", "https://[::1]:8443/r?x#y", "https://u@h/", "https://a%2e/",
		"https://h/%zz", "https://h:x/", "https://h/ r", "HTTPS://h/", "https://[1:2]/"} {
		f.Add(s)
	}
	a := New(Config{Enabled: true, Webhooks: true}, nil, nil, nil)
	f.Fuzz(func(t *testing.T, raw string) {
		if a.checkWebhook(raw) != nil {
			return
		}
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatalf("%q taken, which net/url refuses: %v", raw, err)
		}
		written := strings.TrimPrefix(raw, "https://")
		if i := strings.IndexAny(written, "/?#"); i >= 0 {
			written = written[:i]
		}
		if u.Scheme != "https" || u.User != nil || u.Host != written || written == "" {
			t.Fatalf("%q taken: net/url reads scheme %q, user %v, host %q", raw, u.Scheme, u.User, u.Host)
		}
	})
}

// countingStore counts the subscription reads of the store it wraps.
type countingStore struct {
	Store
	reads atomic.Int32
}

func (c *countingStore) GetReceiptSub(ctx context.Context, id storage.ReceiptSubID) (storage.ReceiptSub, error) {
	c.reads.Add(1)
	return c.Store.GetReceiptSub(ctx, id)
}

// TestPushReceiptOwners: a push naming a subscription is checked against
// its key with one storage read the first time and none after (the
// owner is cached); another key is refused from the cache too; an id
// that names nothing is read each time and refused.
func TestPushReceiptOwners(t *testing.T) {
	s := &countingStore{Store: hookStore(t)}
	a := New(Config{Enabled: true, EndpointURL: "https://push.example", StorageTimeout: 5 * time.Second}, s, testNode{}, nil)
	ctx := context.Background()
	sub := storage.ReceiptSub{KeyHash: [32]byte{7}, Created: time.Now()}
	rand.Read(sub.ID[:])
	et.Must(t, s.PutReceiptSub(ctx, sub), "put the subscription")
	for i := range 3 {
		id, e := a.PushReceipt(ctx, a.URL(sub.ID), sub.KeyHash, true)
		if e != nil || id != sub.ID {
			t.Fatalf("push %d: %x %v", i, id, e)
		}
	}
	if _, e := a.PushReceipt(ctx, a.URL(sub.ID), [32]byte{8}, true); e != errPushReceipt {
		t.Fatalf("another key's push: %v, want errPushReceipt", e)
	}
	if n := s.reads.Load(); n != 1 {
		t.Fatalf("%d subscription reads for four pushes naming it, want 1", n)
	}
	var none storage.ReceiptSubID
	rand.Read(none[:])
	for range 2 {
		if _, e := a.PushReceipt(ctx, a.URL(none), sub.KeyHash, true); e != errPushReceipt {
			t.Fatalf("a push naming no subscription: %v, want errPushReceipt", e)
		}
	}
	if n := s.reads.Load(); n != 3 {
		t.Fatalf("%d subscription reads, want 3 (a missing one is not cached)", n)
	}
}
