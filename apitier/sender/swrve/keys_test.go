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
