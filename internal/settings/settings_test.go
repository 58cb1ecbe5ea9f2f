package settings

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

type conf struct {
	Port    int           `conf:"port" help:"listen port"`
	Name    string        `conf:"name" help:"node name"`
	Debug   bool          `conf:"debug" help:"debug logs"`
	Timeout time.Duration `conf:"timeout" help:"a timeout"`
	Hosts   []string      `conf:"hosts" help:"hosts"`
	Ratio   float64       `conf:"ratio" help:"a ratio"`
	Ignored int           // no conf tag: not a setting
}

func envFrom(m map[string]string) Env { return MapEnv(m) }

func TestPrecedenceDefaultsFileEnvFlags(t *testing.T) {
	file := filepath.Join(t.TempDir(), "c.json")
	os.WriteFile(file, []byte(`{"port": 1, "name": "file", "timeout": "3s", "hosts": ["a","b"], "debug": true}`), 0o600)
	c := conf{Port: 80, Name: "default", Ratio: 0.5}
	env := envFrom(map[string]string{"APP__CONFIG": file, "APP__NAME": "env", "APP__PORT": "2"})
	if _, err := Load(&c, "APP", []string{"-port", "3"}, env, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	if c.Port != 3 || c.Name != "env" || c.Timeout != 3*time.Second || !c.Debug || len(c.Hosts) != 2 || c.Ratio != 0.5 {
		t.Fatalf("got %+v", c)
	}
}

func TestErrors(t *testing.T) {
	var out bytes.Buffer
	c := conf{}
	if _, err := Load(&c, "APP", []string{"-h"}, envFrom(nil), &out); !errors.Is(err, flag.ErrHelp) || !bytes.Contains(out.Bytes(), []byte("APP__PORT")) {
		t.Fatalf("help: %v %q", err, out.String())
	}
	if _, err := Load(&c, "APP", []string{"-port", "x"}, envFrom(nil), &out); err == nil {
		t.Fatal("bad int accepted")
	}
	if _, err := Load(&c, "APP", nil, envFrom(map[string]string{"APP__TIMEOUT": "soon"}), &out); err == nil {
		t.Fatal("bad duration accepted")
	}
	file := filepath.Join(t.TempDir(), "c.json")
	os.WriteFile(file, []byte(`{"nope": 1}`), 0o600)
	if _, err := Load(&c, "APP", []string{"-config", file}, envFrom(nil), &out); err == nil {
		t.Fatal("unknown key in file accepted")
	}
}

func TestDescribe(t *testing.T) {
	d := Describe(&conf{Port: 8080, Timeout: time.Second}, "APP")
	if len(d) != 6 || d[0].Env != "APP__PORT" || d[0].Default != "8080" || d[3].Default != "1s" || d[0].Help != "listen port" {
		t.Fatalf("%+v", d)
	}
}

type shared struct {
	Backend string `conf:"backend" help:"a shared setting"`
}

type tier struct {
	Port int `conf:"port" help:"listen port"`
	shared
}

// TestEmbeddedSettings: settings of an embedded struct load and list like
// the tier's own (both tiers embed the storage settings).
func TestEmbeddedSettings(t *testing.T) {
	c := tier{Port: 1, shared: shared{Backend: "embedded"}}
	if _, err := Load(&c, "APP", []string{"-backend", "scylla"}, envFrom(map[string]string{"APP__PORT": "2"}), &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	if c.Port != 2 || c.Backend != "scylla" {
		t.Fatalf("got %+v", c)
	}
	if d := Describe(&tier{}, "APP"); len(d) != 2 || d[1].Env != "APP__BACKEND" {
		t.Fatalf("describe %+v", d)
	}
}

type cli struct {
	Users   int           `conf:"users" for:"a,b" help:"user count"`
	Rates   []float64     `conf:"rates" for:"a" help:"rates"`
	Hosts   []string      `conf:"hosts" for:"all" help:"hosts"`
	Wait    time.Duration `conf:"wait" for:"b" help:"a wait"`
	Keep    bool          `conf:"keep" for:"all" help:"keep it"`
	Name    string        `conf:"name" for:"all" help:"a name"`
	Big     int64         `conf:"big" for:"all" help:"a big number"`
	Ratio   float64       `conf:"ratio" for:"all" help:"a ratio"`
	Ignored int
}

func forA(tag reflect.StructTag) bool {
	return slices.ContainsFunc(strings.Split(tag.Get("for"), ","), func(s string) bool { return s == "a" || s == "all" })
}

// TestFlags: typed flags with their defaults in -help, lists, and the
// caller's selection by tag.
func TestFlags(t *testing.T) {
	c := cli{Users: 1000, Rates: []float64{250, 0.5}, Name: "x", Wait: time.Second}
	fs := flag.NewFlagSet("cmd", flag.ContinueOnError)
	var help bytes.Buffer
	fs.SetOutput(&help)
	Flags(fs, &c, forA)
	fs.PrintDefaults()
	for _, want := range []string{"-users int\n", "user count (default 1000)", "-rates value\n", "rates (default 250,0.5)",
		"-hosts value\n", "-keep\n", "-name string\n", `a name (default "x")`, "-big int\n", "-ratio float\n"} {
		if !strings.Contains(help.String(), want) {
			t.Errorf("help lacks %q:\n%s", want, help.String())
		}
	}
	if strings.Contains(help.String(), "-wait") || strings.Contains(help.String(), "hosts (default") || strings.Contains(help.String(), "panic") {
		t.Errorf("help:\n%s", help.String())
	}
	err := fs.Parse([]string{"-users", "3_000", "-rates", "100, 200,,400", "-hosts", "a:1,b:2", "-keep", "-big", "0x10", "-ratio", "1.5"})
	if err != nil || c.Users != 3000 || !slices.Equal(c.Rates, []float64{100, 200, 400}) || !slices.Equal(c.Hosts, []string{"a:1", "b:2"}) ||
		!c.Keep || c.Big != 16 || c.Ratio != 1.5 {
		t.Fatalf("parsed %+v %v", c, err)
	}
	for _, args := range [][]string{{"-rates", "1,x"}, {"-users", "many"}, {"-wait", "1s"}} {
		if err := fs.Parse(args); err == nil {
			t.Errorf("%q accepted", args)
		}
	}
	var fromEnv cli
	if _, err := Load(&fromEnv, "APP", nil, envFrom(map[string]string{"APP__RATES": "1, 2.5"}), &bytes.Buffer{}); err != nil ||
		!slices.Equal(fromEnv.Rates, []float64{1, 2.5}) {
		t.Errorf("rates from the environment: %v %v", fromEnv.Rates, err)
	}
	d := Describe(&c, "")
	if len(d) != 8 || d[1].Default != "100,200,400" || d[3].Default != "1s" || d[0].Tag.Get("for") != "a,b" {
		t.Errorf("describe %+v", d)
	}
}
