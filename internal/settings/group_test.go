package settings

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

type partA struct {
	Listen  string        `conf:"listen" help:"a's listen"`
	Key     string        `conf:"key" help:"shared key"`
	Timeout time.Duration `conf:"timeout" help:"a's timeout"`
	OnlyA   int           `conf:"only-a" help:"a alone"`
	shared
}

type partB struct {
	Listen  string        `conf:"listen" help:"b's listen"`
	Key     string        `conf:"key" help:"shared key"`
	Timeout time.Duration `conf:"timeout" help:"b's timeout"`
	OnlyB   bool          `conf:"only-b" help:"b alone"`
	shared
}

func newAB(t *testing.T) (*partA, *partB, *Group) {
	t.Helper()
	a := &partA{Listen: ":1", Key: "ka", Timeout: time.Second, shared: shared{Backend: "x"}}
	b := &partB{Listen: ":2", Key: "kb", Timeout: 2 * time.Second, shared: shared{Backend: "y"}}
	g, err := NewGroup([]string{"key", "backend"}, Part{Name: "a", Cfg: a, Prefix: "a-"}, Part{Name: "b", Cfg: b, Prefix: "b-"})
	if err != nil {
		t.Fatal(err)
	}
	return a, b, g
}

// TestGroupNames: shared names once (the first part's default, copied
// to the others), other common names per part with its prefix, the rest
// as they are, in order of first appearance.
func TestGroupNames(t *testing.T) {
	a, b, g := newAB(t)
	var names []string
	for _, s := range Describe(g, "APP") {
		names = append(names, s.Name+"="+s.Default+"@"+strings.Join(s.Parts, "+"))
	}
	want := []string{"a-listen=:1@a", "b-listen=:2@b", "key=ka@a+b", "a-timeout=1s@a", "b-timeout=2s@b", "only-a=0@a", "backend=x@a+b", "only-b=false@b"}
	if !slices.Equal(names, want) {
		t.Fatalf("settings %q, want %q", names, want)
	}
	if b.Key != "ka" || b.Backend != "x" || a.Key != "ka" {
		t.Fatalf("shared defaults not copied: %+v %+v", a, b)
	}
}

// TestGroupLoad: each source sets a shared setting in every part, and a
// prefixed one in its own part only.
func TestGroupLoad(t *testing.T) {
	file := filepath.Join(t.TempDir(), "c.json")
	os.WriteFile(file, []byte(`{"backend": "file", "a-timeout": "5s", "only-b": true}`), 0o600)
	a, b, g := newAB(t)
	env := envFrom(map[string]string{"APP__CONFIG": file, "APP__KEY": "env-key", "APP__B_LISTEN": ":9"})
	if _, err := Load(g, "APP", []string{"-a-listen", ":8", "-backend", "flag"}, env, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	if a.Listen != ":8" || b.Listen != ":9" || a.Key != "env-key" || b.Key != "env-key" || a.Backend != "flag" || b.Backend != "flag" ||
		a.Timeout != 5*time.Second || b.Timeout != 2*time.Second || !b.OnlyB {
		t.Fatalf("a %+v b %+v", a, b)
	}
	var out bytes.Buffer
	if _, err := Load(g, "APP", []string{"-listen", ":1"}, envFrom(nil), &out); err == nil {
		t.Fatal("a name that exists only prefixed was accepted")
	}
}

func TestGroupErrors(t *testing.T) {
	type other struct {
		Key int `conf:"key" help:"an int"`
	}
	if _, err := NewGroup([]string{"key"}, Part{Name: "a", Cfg: &partA{}}, Part{Name: "o", Cfg: &other{}}); err == nil {
		t.Error("a shared setting of two types was accepted")
	}
	type clash struct {
		Listen string `conf:"a-listen" help:"clashes with a's prefixed listen"`
	}
	if _, err := NewGroup(nil, Part{Name: "a", Cfg: &partA{}, Prefix: "a-"}, Part{Name: "b", Cfg: &partB{}, Prefix: "b-"},
		Part{Name: "c", Cfg: &clash{}}); err == nil {
		t.Error("a prefixed name clashing with another setting was accepted")
	}
	if _, err := NewGroup(nil, Part{Name: "a", Cfg: partA{}}); err == nil {
		t.Error("a struct value (not a pointer) was accepted")
	}
}
