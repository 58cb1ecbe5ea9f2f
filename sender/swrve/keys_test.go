package swrve

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path+".new", []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".new", path); err != nil {
		t.Fatal(err)
	}
}

// A bad keys file leaves the mapping in use, and is read once: the poll
// (Changed) does not read it again until it changes; a good file then
// takes effect.
func TestKeysBadFileKeepsMapping(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys.yaml")
	writeFile(t, path, "messagePrototypePushKeys:\n  Hello: {IOS: k1}\n")
	k, err := LoadKeys(path)
	if err != nil {
		t.Fatal(err)
	}
	if k.Changed() {
		t.Fatal("changed right after the load")
	}
	writeFile(t, path, "messagePrototypePushKeys:\n  Hello: {IOS: k1, WINDOWS: k2}\n")
	if !k.Changed() {
		t.Fatal("a new file is not seen")
	}
	if _, err := k.Reload(); err == nil || !strings.Contains(err.Error(), "content in use stays") {
		t.Fatalf("bad file: %v", err)
	}
	if key, ok := k.Lookup("Hello", "IOS"); !ok || key != "k1" {
		t.Fatalf("after a bad file: %q %v, want the previous k1", key, ok)
	}
	if k.Changed() {
		t.Fatal("the bad file would be read again at every poll")
	}
	writeFile(t, path, "messagePrototypePushKeys:\n  Hello: {IOS: k3}\n")
	if !k.Changed() {
		t.Fatal("the fixed file is not seen")
	}
	if changed, err := k.Reload(); err != nil || !changed {
		t.Fatalf("fixed file: %v %v", changed, err)
	}
	if key, _ := k.Lookup("Hello", "IOS"); key != "k3" {
		t.Fatalf("after the fix: %q, want k3", key)
	}
}

// A keys file rewritten in place and read before its keys are written
// (its mapping or a prototype given nothing) is refused on reload, the
// mapping in use stays, and a start with it fails; "{}" maps nothing on
// purpose. Taken, it would FAIL the queued pushes of every prototype.
func TestKeysHalfWrittenRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys.yaml")
	whole := "swrve:\n  messagePrototypePushKeys:\n    'Hello':\n      IOS: k1\n"
	writeFile(t, path, whole)
	k, err := LoadKeys(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{"swrve:\n", "swrve:\n  messagePrototypePushKeys:\n", "swrve:\n  messagePrototypePushKeys:\n    'Hello':\n",
		"messagePrototypePushKeys:\n", "messagePrototypePushKeys: {Hello: {}}\n", "", "# keys\n"} {
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil { // in place: not atomic
			t.Fatal(err)
		}
		if _, err := k.Reload(); err == nil {
			t.Errorf("reload of %q taken", text)
		}
		if key, ok := k.Lookup("Hello", "IOS"); !ok || key != "k1" {
			t.Errorf("after %q: %q %v, want the previous k1", text, key, ok)
		}
		if _, err := LoadKeys(path); err == nil {
			t.Errorf("a start with %q", text)
		}
	}
	// No prefix of the whole file, cut at any byte, maps fewer prototypes.
	for n := range len(whole) {
		if m, err := ParseKeys([]byte(whole[:n])); err == nil && len(m["Hello"]) == 0 {
			t.Errorf("its first %d bytes map nothing for Hello: %q", n, whole[:n])
		}
	}
	if m, err := ParseKeys([]byte("swrve:\n  messagePrototypePushKeys: {}\n")); err != nil || len(m) != 0 {
		t.Errorf(`"{}": %v %v, want an empty mapping`, m, err)
	}
}
