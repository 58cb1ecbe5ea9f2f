package e2etest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// InCI reports whether the tests run in CI, where a missing tool is a
// failure rather than a reason to skip.
func InCI() bool { return os.Getenv("CI") == "true" }

// Require fails the test in CI and skips it elsewhere, saying why: a
// skipped real-client test must never look like a pass.
func Require(t testing.TB, ok bool, hint string) {
	t.Helper()
	if ok {
		return
	}
	if InCI() {
		t.Fatal(hint)
	}
	t.Skip(hint)
}

// ModuleRoot is the repository's root directory.
func ModuleRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}

// WebPushNode returns tools/webpush-node (send.js, keys.js) once node and
// its packages are installed; otherwise it fails (CI) or skips with the
// install hint.
func WebPushNode(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(ModuleRoot(), "tools", "webpush-node")
	_, nodeErr := exec.LookPath("node")
	_, modErr := os.Stat(filepath.Join(dir, "node_modules", "web-push"))
	Require(t, nodeErr == nil && modErr == nil,
		"the npm web-push package is not installed: apt-get install nodejs npm, then make node-deps (make test does it)")
	return dir
}

// NodeJSON runs one of the scripts in dir with args as its JSON argument
// and decodes what it prints into out.
func NodeJSON(t testing.TB, dir, script string, args, out any) {
	t.Helper()
	if err := RunNodeJSON(dir, script, args, out); err != nil {
		t.Fatal(err)
	}
}

// RunNodeJSON is NodeJSON returning its error, for goroutines.
func RunNodeJSON(dir, script string, args, out any) error {
	cmdArgs := []string{filepath.Join(dir, script)}
	if args != nil {
		b, err := json.Marshal(args)
		if err != nil {
			return err
		}
		cmdArgs = append(cmdArgs, string(b))
	}
	cmd := exec.Command("node", cmdArgs...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("node %s: %v\n%s", script, err, stderr.String())
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("node %s printed %q", script, b)
	}
	return nil
}

// VAPIDKeys is an application server's key pair as keys.js prints it
// (base64url, no padding).
type VAPIDKeys struct {
	Public  string `json:"publicKey"`
	Private string `json:"privateKey"`
}

// SendResult is send.js's answer: the push service's response.
type SendResult struct {
	Status  int               `json:"status"`
	Headers map[string]string `json:"headers"`
	Body    string            `json:"body"`
}

// Build compiles the module's packages (paths relative to the module
// root, "./stack/cmd/autopush") into dir, which it creates.
func Build(t testing.TB, dir string, pkgs ...string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, pkg := range pkgs {
		cmd := exec.Command("go", "build", "-o", dir+string(filepath.Separator), pkg)
		cmd.Dir = ModuleRoot()
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, out)
		}
	}
}
