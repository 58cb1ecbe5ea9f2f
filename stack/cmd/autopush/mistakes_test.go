package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	et "github.com/autopush-go/autopush/engine/enginetest"
	"github.com/autopush-go/autopush/internal/proc"
	"github.com/autopush-go/autopush/internal/token"
)

// exitOf runs cmd, whose environment is PATH and env alone, and returns
// its exit code and output. A process that logs a MozLog line went past
// its configuration to start: it is killed and the test fails.
func exitOf(t *testing.T, cmd *exec.Cmd, env ...string) (int, string) {
	t.Helper()
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	started := make(chan struct{}, 1)
	p, err := proc.Start(context.Background(), cmd, proc.Config{Watch: func(line []byte) {
		if bytes.HasPrefix(line, []byte("{")) {
			select {
			case started <- struct{}{}:
			default:
			}
		}
	}})
	et.Must(t, err, "start "+cmd.String())
	select {
	case <-p.Exited():
		return p.ExitCode(), string(p.Output())
	case <-started:
	case <-time.After(2 * time.Minute): // a bound on a failure, not a wait for success
	}
	p.Kill()
	<-p.Exited()
	t.Errorf("%s did not exit: it went on to start\n%s", cmd, p.Tail())
	return -1, string(p.Output())
}

// TestConfigMistakesStopTheStart: a mistyped variable, a log level that
// is none, an unknown file key, a flag that is none and a positional
// argument each exit 1 naming the setting (and the nearest real one),
// before anything listens.
func TestConfigMistakesStopTheStart(t *testing.T) {
	bin := binary(t)
	dir := t.TempDir()
	key := "AUTOPUSH__CRYPTO_KEY=" + token.GenerateKey()
	file := filepath.Join(dir, "autopush.json")
	et.Must(t, os.WriteFile(file, []byte(`{"connect-listen": "127.0.0.1:0", "reciepts": true}`), 0o600), "config file")
	for _, tc := range []struct {
		name string
		args []string
		env  []string
		want []string
	}{
		{"typo in a variable", nil, []string{"AUTOPUSH__RECIEPTS=true"}, []string{"AUTOPUSH__RECIEPTS (did you mean AUTOPUSH__RECEIPTS?)"}},
		{"log level", []string{"-log-level", "verbose"}, nil, []string{"-log-level", `"verbose" is not one of debug|info|warn|error`}},
		{"log level variable", nil, []string{"AUTOPUSH__LOG_LEVEL=verbose"}, []string{"AUTOPUSH__LOG_LEVEL", `"verbose" is not one of debug|info|warn|error`}},
		{"unknown file key", []string{"-config", file}, nil, []string{`unknown setting "reciepts" (did you mean "receipts"?)`}},
		{"unknown flag", []string{"-reciepts"}, nil, []string{"-reciepts (did you mean -receipts?)"}},
		{"unknown subcommand", []string{"serve"}, nil, []string{`unexpected argument "serve"`}},
		{"value after a boolean flag", []string{"-receipts", "true"}, nil, []string{`unexpected argument "true"`, "-name=false"}},
		{"storage", []string{"-storage", "pebble"}, nil, []string{"-storage", `"pebble" is not one of embedded|scylla`}},
		{"sender policy", []string{"-sender-interrupted", "retry"}, nil, []string{"-sender-interrupted", "resend|fail"}},
	} {
		// Addresses of its own: the code before these checks started.
		env := []string{key}
		for k, v := range minimal(t, dir) {
			env = append(env, settingEnv(k)+"="+v)
		}
		code, out := exitOf(t, exec.Command(bin, tc.args...), append(env, tc.env...)...)
		if code != 1 || !strings.HasPrefix(out, "autopush: ") {
			t.Errorf("%s: exit %d, want 1 with one autopush: line\n%s", tc.name, code, out)
		}
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("%s: output lacks %q:\n%s", tc.name, w, out)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "store")); !os.IsNotExist(err) {
		t.Errorf("a refused start opened the store: %v", err)
	}
}

// TestCheckConfig: -check-config on the shipped systemd env file exits 0
// saying "configuration OK", without listening (its address is taken
// here) or opening the store; with a typo added, a key file that holds
// no key or a clients file that is missing it exits 1 naming it. A bare
// boolean flag is true, so -receipts passes.
func TestCheckConfig(t *testing.T) {
	bin := binary(t)
	env := shippedVars(t)
	held, err := net.Listen("tcp", "127.0.0.1:0")
	et.Must(t, err, "listen")
	defer held.Close()
	dir := t.TempDir()
	env = append(env, "AUTOPUSH__CONNECT_LISTEN="+held.Addr().String(), "AUTOPUSH__DATA_DIR="+filepath.Join(dir, "store"),
		"AUTOPUSH__CRYPTO_KEY_FILE="+filepath.Join(dir, "crypto_key"))
	code, out := exitOf(t, exec.Command(bin, "-check-config", "-receipts"), env...)
	if code != 0 || strings.TrimSpace(out) != "configuration OK" {
		t.Fatalf("-check-config with ops/systemd/autopush.env: exit %d\n%s", code, out)
	}
	for _, made := range []string{"store", "crypto_key"} {
		if _, err := os.Stat(filepath.Join(dir, made)); !os.IsNotExist(err) {
			t.Errorf("-check-config made %s: %v", made, err)
		}
	}
	bad := filepath.Join(dir, "bad_key")
	et.Must(t, os.WriteFile(bad, []byte("not a key\n"), 0o600), "bad key file")
	for want, extra := range map[string]string{
		"AUTOPUSH__RECIEPTS (did you mean AUTOPUSH__RECEIPTS?)": "AUTOPUSH__RECIEPTS=true",
		"crypto-key-file " + bad:                                "AUTOPUSH__CRYPTO_KEY_FILE=" + bad,
		"push-clients-file":                                     "AUTOPUSH__PUSH_CLIENTS_FILE=" + filepath.Join(dir, "missing.yaml"),
	} {
		code, out := exitOf(t, exec.Command(bin, "-check-config"), append(env, extra)...)
		if code != 1 || !strings.Contains(out, want) || strings.Contains(out, "configuration OK") {
			t.Errorf("-check-config with %s: exit %d, want 1 saying %q\n%s", extra, code, want, out)
		}
	}
}

// shippedVars is ops/systemd/autopush.env's variables, as systemd passes
// them.
func shippedVars(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../../../ops/systemd/autopush.env")
	et.Must(t, err, "read the env file")
	var env []string
	for line := range strings.SplitSeq(string(b), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			env = append(env, line)
		}
	}
	if len(env) < 5 {
		t.Fatalf("ops/systemd/autopush.env has %d variables", len(env))
	}
	return env
}

// TestEveryBinaryChecks: each tier binary configured through settings
// answers -check-config with "configuration OK" on a valid
// configuration, and refuses a mistyped variable (autoendpoint's
// AUTOENDPOINT__ alias too) and a positional argument.
func TestEveryBinaryChecks(t *testing.T) {
	binary(t)
	dir := t.TempDir()
	build := exec.Command("go", "build", "-o", dir+"/", "../../../engine/cmd/autoconnect", "../../../apitier/cmd/autoendpoint", "../../../sender/cmd/autosender")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	key := token.GenerateKey()
	for _, b := range []struct {
		name, prefix string
		valid        []string
		typo, want   string
	}{
		{"autoconnect", "AUTOCONNECT", []string{"AUTOCONNECT__CRYPTO_KEY=" + key, "AUTOCONNECT__NODE_SECRET=s"}, "AUTOCONNECT__LOG_LEVLE=debug", "AUTOCONNECT__LOG_LEVLE (did you mean AUTOCONNECT__LOG_LEVEL?)"},
		{"autoendpoint", "AUTOEND", []string{"AUTOEND__CRYPTO_KEY=" + key, "AUTOENDPOINT__NODE_SECRET=s"}, "AUTOENDPOINT__RECIEPTS=true", "AUTOENDPOINT__RECIEPTS (did you mean AUTOENDPOINT__RECEIPTS?)"},
		{"autosender", "AUTOSENDER", []string{"AUTOSENDER__LOG_PROVIDER_FILE=" + filepath.Join(dir, "pushes.log")}, "AUTOSENDER__SENDER_WORKER=true", "AUTOSENDER__SENDER_WORKER (did you mean AUTOSENDER__SENDER_WORKERS?)"},
	} {
		bin := filepath.Join(dir, b.name)
		valid := append(b.valid, b.prefix+"__DATA_DIR="+filepath.Join(dir, b.name+"-store"))
		if code, out := exitOf(t, exec.Command(bin, "-check-config"), valid...); code != 0 || strings.TrimSpace(out) != "configuration OK" {
			t.Errorf("%s -check-config: exit %d\n%s", b.name, code, out)
		}
		for _, run := range []struct {
			args       []string
			env, wants string
		}{{[]string{"-check-config"}, b.typo, b.want}, {[]string{"-check-config", "foo"}, "", `unexpected argument "foo"`},
			{[]string{"-check-config", "-log-level", "verbose"}, "", `"verbose" is not one of debug|info|warn|error`}} {
			code, out := exitOf(t, exec.Command(bin, run.args...), append(valid, run.env)...)
			if code != 1 || !strings.Contains(out, run.wants) || !bytes.HasPrefix([]byte(out), []byte(b.name+": ")) {
				t.Errorf("%s %q with %s: exit %d, want 1 saying %q\n%s", b.name, run.args, run.env, code, run.wants, out)
			}
		}
		if _, err := os.Stat(filepath.Join(dir, b.name+"-store")); !os.IsNotExist(err) {
			t.Errorf("%s -check-config opened the store: %v", b.name, err)
		}
	}
}
