package clients

import (
	"encoding/base64"
	"errors"
	"fmt"
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
	if cs, err := Parse([]byte("# none yet\nclients: {}\n")); err != nil || len(cs) != 0 {
		t.Errorf(`"clients: {}": %v %v, want no clients`, cs, err)
	}
}

// A file that names no client without saying so is refused: each of
// these is what a file rewritten in place can be when it is read.
func TestParseRefusesNoClients(t *testing.T) {
	for name, text := range map[string]string{
		"0 bytes":           "",
		"blank":             " \n\n",
		"comments only":     "# The push API's clients\n# mint a key with pushclient\n",
		"document start":    "---\n",
		"clients: nothing":  "clients:",
		"clients: newline":  "clients:\n",
		"clients: comment":  "clients:\n  # marketing:\n",
		"clients: null":     "clients: null\n",
		"clients: ~":        "clients: ~\n",
		"comments, clients": "# clients\nclients:\n",
	} {
		if cs, err := Parse([]byte(text)); !errors.Is(err, ErrNoClients) {
			t.Errorf("%s: %v %v, want ErrNoClients", name, cs, err)
		}
	}
}

// No prefix of a file with clients, cut at any byte, parses as a file
// with none: a file read while it is rewritten in place is refused, or
// has one client at least. (A prefix cut after a whole client parses as
// the file of the clients before the cut, and one cut inside a client's
// rate or outstanding as that client with a smaller or no quota: those are
// edits as far as any reader can tell; docs/sender.md says so.)
func TestPrefixesNeverNameNoClients(t *testing.T) {
	ops := Client{Name: "ops", KeyHash: Hash("ops"), Scopes: []Scope{Admin}}
	whole := "# The push API's clients.\nclients:\n" + Entry(marketing()) + Entry(ops)
	flow := fmt.Sprintf("clients: {marketing: {key_sha256: %x, scopes: [send]}}\n", Hash("m"))
	for _, text := range []string{whole, flow} {
		if cs, err := Parse([]byte(text)); err != nil || len(cs) == 0 {
			t.Fatalf("the whole file: %v %v", cs, err)
		}
		for n := range len(text) {
			cs, err := Parse([]byte(text[:n]))
			if err == nil && len(cs) == 0 {
				t.Errorf("its first %d bytes parse as no client:\n%s", n, text[:n])
			}
		}
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

// A file rewritten in place and read before its first client is written
// (0 bytes, or "clients:" alone) is refused on reload: the clients in use
// stay. Starting with one fails, naming the file; "clients: {}" starts
// with no client, as it says.
func TestRegistryRefusesNoClients(t *testing.T) {
	path := filepath.Join(t.TempDir(), "clients.yaml")
	inPlace := func(text string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil { // truncates, then writes: not atomic
			t.Fatal(err)
		}
	}
	inPlace("clients:\n" + Entry(marketing()))
	r, err := Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{"", "clients:\n", "# The push API's clients\n"} {
		inPlace(text)
		if err := r.Reload(); !errors.Is(err, ErrNoClients) || !strings.Contains(err.Error(), "content in use stays") {
			t.Errorf("reload of %q: %v, want ErrNoClients and the clients in use kept", text, err)
		}
		if c, ok := r.Clients().Lookup(marketingKey); !ok || c.Name != "marketing" {
			t.Errorf("reload of %q dropped the clients in use", text)
		}
		if _, err := Load(path, []string{"legacy"}); !errors.Is(err, ErrNoClients) || !strings.Contains(err.Error(), path) {
			t.Errorf("start with %q: %v, want ErrNoClients naming the file", text, err)
		}
	}
	inPlace("clients: {}\n")
	if err := r.Reload(); err != nil || r.Clients().Len() != 0 {
		t.Fatalf(`reload of "clients: {}": %v, %d clients, want none`, err, r.Clients().Len())
	}
	inPlace("")
	if err := r.Reload(); !errors.Is(err, ErrNoClients) {
		t.Fatalf("reload of an empty file after \"clients: {}\": %v", err)
	}
}
