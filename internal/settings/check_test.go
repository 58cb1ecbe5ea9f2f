package settings

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

type checked struct {
	Port     int           `conf:"port" help:"listen port"`
	Receipts bool          `conf:"receipts" help:"delivery receipts"`
	Level    string        `conf:"log-level" enum:"debug|info|warn|error" help:"log level"`
	Read     string        `conf:"consistency-read" enum:"|ONE|QUORUM" help:"read level"`
	Timeout  time.Duration `conf:"timeout" help:"a timeout"`
	Hosts    []string      `conf:"hosts" help:"hosts"`
	Rates    []float64     `conf:"rates" help:"rates"`
	Ratio    float64       `conf:"ratio" help:"a ratio"`
	Name     string        `conf:"name" help:"a name"`
}

func defaultChecked() checked { return checked{Port: 80, Level: "info", Name: "x"} }

// load runs Load on a fresh checked with args and env, failing the test
// when the error does not contain each of want (or, with no want, when
// there is one).
func load(t *testing.T, args []string, env Env, want ...string) (checked, Request) {
	t.Helper()
	c := defaultChecked()
	req, err := Load(&c, "APP", args, env, &bytes.Buffer{})
	if len(want) == 0 && err != nil {
		t.Fatalf("%q %v: %v", args, env.Names(), err)
	}
	for _, w := range want {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("%q %v: error %v, want it to say %q", args, env.Names(), err, w)
		}
	}
	return c, req
}

// TestUnknownVariable: a PREFIX__ variable that is no setting stops the
// load naming it and the nearest setting's variable (a swapped pair of
// letters is one edit), also under an alias prefix; PREFIX__CONFIG and
// other prefixes pass.
func TestUnknownVariable(t *testing.T) {
	load(t, nil, envFrom(map[string]string{"APP__RECIEPTS": "true"}), "unknown variable APP__RECIEPTS (did you mean APP__RECEIPTS?)")
	load(t, nil, envFrom(map[string]string{"APP__LOG_LEVLE": "debug", "APP__PORT": "1"}), "APP__LOG_LEVLE (did you mean APP__LOG_LEVEL?)")
	_, err := Load(&checked{}, "APP", nil, envFrom(map[string]string{"APP__COMPLETELY_ELSE": "1"}), &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "APP__COMPLETELY_ELSE") || strings.Contains(err.Error(), "did you mean") {
		t.Errorf("a name near no setting: %v, want it named without a suggestion", err)
	}
	file := filepath.Join(t.TempDir(), "c.json")
	os.WriteFile(file, []byte(`{"port": 7}`), 0o600)
	c, _ := load(t, nil, envFrom(map[string]string{"APP__CONFIG": file, "APPX__RECIEPTS": "1", "APP_RECIEPTS": "1", "OTHER__X": "1"}))
	if c.Port != 7 {
		t.Errorf("APP__CONFIG not read: port %d", c.Port)
	}

	alias := func(m map[string]string) Env { return WithAlias(envFrom(m), "APP", "APPLICATION") }
	load(t, nil, alias(map[string]string{"APPLICATION__PROT": "1"}), "APPLICATION__PROT (did you mean APPLICATION__PORT?)")
	if c, _ := load(t, nil, alias(map[string]string{"APPLICATION__PORT": "5", "APPLICATION__NAME": "alias", "APP__NAME": "own"})); c.Port != 5 || c.Name != "own" {
		t.Errorf("alias: port %d name %q, want 5 from the alias and the prefix's own name", c.Port, c.Name)
	}
}

// TestUnknownKeyAndFlag: a file key or a flag that is no setting names
// the nearest.
func TestUnknownKeyAndFlag(t *testing.T) {
	file := filepath.Join(t.TempDir(), "c.json")
	os.WriteFile(file, []byte(`{"port": 1, "reciepts": true}`), 0o600)
	load(t, []string{"-config", file}, envFrom(nil), `unknown setting "reciepts" (did you mean "receipts"?)`)
	load(t, []string{"-prot", "1"}, envFrom(nil), "flag provided but not defined: -prot (did you mean -port?)")
}

// TestEnum: a value outside a setting's enum fails from every source,
// naming the setting and the values; case is ignored, the enum's spelling
// kept; an empty alternative allows "".
func TestEnum(t *testing.T) {
	const values = `"verbose" is not one of debug|info|warn|error`
	load(t, []string{"-log-level", "verbose"}, envFrom(nil), "flag -log-level", values)
	load(t, nil, envFrom(map[string]string{"APP__LOG_LEVEL": "verbose"}), "env APP__LOG_LEVEL", values)
	file := filepath.Join(t.TempDir(), "c.json")
	os.WriteFile(file, []byte(`{"log-level": "verbose"}`), 0o600)
	load(t, []string{"-config", file}, envFrom(nil), `"log-level"`, values)
	load(t, []string{"-consistency-read", "TWO"}, envFrom(nil), `"TWO" is not one of ONE|QUORUM, or empty`)
	c, _ := load(t, []string{"-log-level", "DEBUG", "-consistency-read", "quorum"}, envFrom(nil))
	if c.Level != "debug" || c.Read != "QUORUM" {
		t.Errorf("level %q read %q, want the enum's spelling", c.Level, c.Read)
	}
	if c, _ := load(t, []string{"-consistency-read="}, envFrom(nil)); c.Read != "" {
		t.Errorf("empty alternative: %q", c.Read)
	}
}

// TestBoolFlag: a boolean setting's flag alone means true, and
// -name=false overrides the environment; a value after it is a
// positional argument, refused.
func TestBoolFlag(t *testing.T) {
	if c, _ := load(t, []string{"-receipts", "-port", "2"}, envFrom(nil)); !c.Receipts || c.Port != 2 {
		t.Errorf("-receipts alone: %+v", c)
	}
	if c, _ := load(t, []string{"-receipts=false"}, envFrom(map[string]string{"APP__RECEIPTS": "true"})); c.Receipts {
		t.Error("-receipts=false did not override APP__RECEIPTS=true")
	}
	load(t, []string{"-receipts", "false"}, envFrom(nil), `unexpected argument "false"`, "-name=false")
}

// TestArgs: a positional argument (a subcommand this binary does not
// have, a word after the flags) is ErrArgs naming it; -check-config is a
// request, not a setting.
func TestArgs(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"-port", "3", "foo"}} {
		c := defaultChecked()
		_, err := Load(&c, "APP", args, envFrom(nil), &bytes.Buffer{})
		if !errors.Is(err, ErrArgs) || !strings.Contains(err.Error(), `"`+args[len(args)-1]+`"`) {
			t.Errorf("%q: %v, want ErrArgs naming the argument", args, err)
		}
	}
	if _, req := load(t, []string{"-check-config", "-port", "3"}, envFrom(nil)); !req.CheckConfig {
		t.Error("-check-config not reported")
	}
	if _, req := load(t, []string{"-port", "3"}, envFrom(nil)); req.CheckConfig {
		t.Error("CheckConfig without -check-config")
	}
}

// TestTypedHelp: -help shows each setting's type, variable and default,
// in field order.
func TestTypedHelp(t *testing.T) {
	var out bytes.Buffer
	c := defaultChecked()
	if _, err := Load(&c, "APP", []string{"-help"}, envFrom(nil), &out); err == nil {
		t.Fatal("-help returned no error")
	}
	help := out.String()
	for _, want := range []string{"-port int\n", "(env APP__PORT, default 80)", "-receipts bool\n", "default false; -receipts alone means true",
		"-log-level one of debug|info|warn|error\n", `(env APP__LOG_LEVEL, default "info")`, "-consistency-read one of ONE|QUORUM, or empty\n",
		"-timeout duration\n", "-hosts list\n", "-rates number list\n", "-ratio float\n", "-name string\n", "-check-config\n", "-config string\n"} {
		if !strings.Contains(help, want) {
			t.Errorf("help lacks %q:\n%s", want, help)
		}
	}
	if strings.Index(help, "-port") > strings.Index(help, "-name") {
		t.Errorf("help is not in field order:\n%s", help)
	}
	d := Describe(&c, "APP")
	if d[2].Type != "one of debug|info|warn|error" || len(d[3].Enum) != 3 || d[1].Type != "bool" || d[4].Type != "duration" {
		t.Errorf("describe types: %+v", d)
	}
}
