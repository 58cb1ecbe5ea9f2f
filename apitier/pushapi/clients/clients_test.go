package clients

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

const marketingKey = "marketing-key-0123456789"

func marketing() Client {
	return Client{Name: "marketing", KeyHash: Hash(marketingKey), Scopes: []Scope{Send, Read}, Rate: 2.5, Outstanding: 100}
}

func TestEntryRoundTrip(t *testing.T) {
	ops := Client{Name: "ops.team_1", KeyHash: Hash("ops"), Scopes: []Scope{Admin}}
	text := "clients:\n" + Entry(marketing()) + Entry(ops)
	got, err := Parse([]byte(text))
	if err != nil {
		t.Fatalf("Parse of\n%s: %v", text, err)
	}
	if want := []Client{marketing(), ops}; !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
}

func TestParseRefuses(t *testing.T) {
	hash := strings.Repeat("ab", 32)
	for name, text := range map[string]string{
		"not YAML":          "clients: [",
		"unknown field":     "clients:\n  a: {key_sha256: " + hash + ", scopes: [send], burst: 3}\n",
		"unknown top field": "client:\n  a: {key_sha256: " + hash + ", scopes: [send]}\n",
		"short hash":        "clients:\n  a: {key_sha256: abcd, scopes: [send]}\n",
		"not hex":           "clients:\n  a: {key_sha256: " + strings.Repeat("zz", 32) + ", scopes: [send]}\n",
		"no scopes":         "clients:\n  a: {key_sha256: " + hash + "}\n",
		"unknown scope":     "clients:\n  a: {key_sha256: " + hash + ", scopes: [write]}\n",
		"negative rate":     "clients:\n  a: {key_sha256: " + hash + ", scopes: [send], rate: -1}\n",
		"NaN rate":          "clients:\n  a: {key_sha256: " + hash + ", scopes: [send], rate: .nan}\n",
		"huge outstanding":  "clients:\n  a: {key_sha256: " + hash + ", scopes: [send], outstanding: 100000000}\n",
		"bad name":          "clients:\n  'a b': {key_sha256: " + hash + ", scopes: [send]}\n",
		"name of *":         "clients:\n  '*': {key_sha256: " + hash + ", scopes: [send]}\n",
		"long name":         "clients:\n  " + strings.Repeat("n", 65) + ": {key_sha256: " + hash + ", scopes: [send]}\n",
	} {
		if _, err := Parse([]byte(text)); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
	if cs, err := Parse(nil); err != nil || len(cs) != 0 {
		t.Errorf("an empty file: %v %v, want no clients", cs, err)
	}
}

func TestLookupAndScopes(t *testing.T) {
	s, err := NewSet([]Client{marketing()}, FromKeys([]string{"old-1", "old-2"}))
	if err != nil {
		t.Fatal(err)
	}
	c, ok := s.Lookup(marketingKey)
	if !ok || c.Name != "marketing" || !c.Can(Send) || !c.Can(Read) || c.Can(Admin) {
		t.Fatalf("marketing: %+v %v", c, ok)
	}
	c, ok = s.Lookup("old-2")
	if !ok || c.Name != "key-2" || !c.Can(Send) || !c.Can(Read) || !c.Can(Admin) || c.Rate != 0 || c.Outstanding != 0 {
		t.Fatalf("push-api-keys' second key: %+v %v, want the admin key-2 without quotas", c, ok)
	}
	for _, k := range []string{"", "old-3", marketingKey + " "} {
		if c, ok := s.Lookup(k); ok {
			t.Errorf("%q found %s", k, c.Name)
		}
	}
	if _, err := NewSet([]Client{{Name: "key-1", KeyHash: Hash("x")}}, FromKeys([]string{"y"})); err == nil {
		t.Error("a file client named key-1 beside push-api-keys")
	}
	if _, err := NewSet([]Client{{Name: "a", KeyHash: Hash("x")}}, FromKeys([]string{"x"})); err == nil {
		t.Error("two clients with one key")
	}
}

func TestMint(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		k, err := Mint()
		if err != nil {
			t.Fatal(err)
		}
		b, err := base64.RawURLEncoding.DecodeString(k)
		if err != nil || len(b) != KeyBytes || len(k) != 43 || seen[k] {
			t.Fatalf("key %q: %v, %d bytes, seen %v", k, err, len(b), seen[k])
		}
		seen[k] = true
	}
}

// A file that does not load keeps the clients in use; a good one
// replaces them; push-api-keys stay either way.
func TestRegistryReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "clients.yaml")
	write := func(text string) {
		t.Helper()
		if err := os.WriteFile(path+".new", []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".new", path); err != nil {
			t.Fatal(err)
		}
	}
	write("clients:\n" + Entry(marketing()))
	r, err := Load(path, []string{"legacy"})
	if err != nil {
		t.Fatal(err)
	}
	has := func(key string) bool { _, ok := r.Clients().Lookup(key); return ok }
	if !has(marketingKey) || !has("legacy") || !r.HasFile() {
		t.Fatal("clients not loaded")
	}
	write("clients:\n  marketing: {key_sha256: nope}\n")
	if err := r.Reload(); err == nil || !strings.Contains(err.Error(), "content in use stays") {
		t.Fatalf("bad file: %v", err)
	}
	if !has(marketingKey) || !has("legacy") {
		t.Fatal("a bad file dropped the clients in use")
	}
	other := Client{Name: "other", KeyHash: Hash("other-key"), Scopes: []Scope{Read}}
	write("clients:\n" + Entry(other))
	if err := r.Reload(); err != nil {
		t.Fatal(err)
	}
	if has(marketingKey) || !has("other-key") || !has("legacy") {
		t.Fatal("the new file is not in use")
	}
	write("clients:\n  key-1: {key_sha256: " + strings.Repeat("0", 64) + ", scopes: [read]}\n")
	if err := r.Reload(); err == nil || !has("other-key") {
		t.Fatalf("a file naming key-1 beside push-api-keys: %v", err)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.yaml"), nil); err == nil {
		t.Fatal("a missing file loaded")
	}
}
