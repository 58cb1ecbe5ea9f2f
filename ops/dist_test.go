package ops_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	et "github.com/autopush-go/autopush/engine/enginetest"
	"github.com/autopush-go/autopush/internal/proc"
	"github.com/autopush-go/autopush/stack/single"
	"github.com/autopush-go/autopush/tools/e2e/e2etest"
)

// The package of ops/packaging/nfpm.yaml installs these (make dist); the
// tests below check the file, the built .deb and .rpm, and an install.
const unitPath = "/usr/lib/systemd/system/autopush.service"

var packaged = []string{"/etc/autopush/autopush.env", "/usr/bin/autokey", "/usr/bin/autopush", "/usr/bin/cqlschema",
	"/usr/bin/endpointdiag", "/usr/bin/pushclient", "/usr/bin/pushsend", unitPath, "/usr/share/autopush/push-clients.yaml"}

// TestPackageMatchesUnit: the package installs the unit's ExecStart,
// the unit itself where systemd finds packaged units, and its
// EnvironmentFile as a configuration file kept when edited; its
// postinstall makes the unit's User and Group and the StateDirectory.
func TestPackageMatchesUnit(t *testing.T) {
	var cfg struct {
		Contents []struct{ Src, Dst, Type string }
		Scripts  map[string]string
	}
	if err := yaml.Unmarshal(read(t, "ops/packaging/nfpm.yaml"), &cfg); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{} // dst → type
	var dsts []string
	for _, c := range cfg.Contents {
		if c.Type != "dir" {
			files[c.Dst] = c.Type
			dsts = append(dsts, c.Dst)
		}
	}
	slices.Sort(dsts)
	if !slices.Equal(dsts, packaged) {
		t.Errorf("nfpm.yaml installs %v, want %v", dsts, packaged)
	}
	u := parseUnit(t, read(t, "ops/systemd/autopush.service"))
	if _, ok := files[u.get("Service", "ExecStart")]; !ok {
		t.Errorf("the package does not install ExecStart %s", u.get("Service", "ExecStart"))
	}
	if files[u.get("Service", "EnvironmentFile")] != "config|noreplace" {
		t.Errorf("EnvironmentFile %s is not a config|noreplace file of the package", u.get("Service", "EnvironmentFile"))
	}
	post := string(read(t, cfg.Scripts["postinstall"]))
	for _, want := range []string{"groupadd --system " + u.get("Service", "Group"), "--gid " + u.get("Service", "Group"),
		"/var/lib/" + u.get("Service", "StateDirectory"), "-m " + u.get("Service", "StateDirectoryMode")} {
		if !strings.Contains(post, want) {
			t.Errorf("postinstall.sh lacks %q", want)
		}
	}
	if !strings.Contains(post, " "+u.get("Service", "User")+"\n") {
		t.Errorf("postinstall.sh does not make the unit's user %s", u.get("Service", "User"))
	}
}

// distEnv is what make dist-test passes in the variable name (a file
// relative to the repository, or the version), or a skip: the tests that
// use it install packages on this machine and run only there.
func distEnv(t *testing.T, name string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		t.Skipf("%s unset: make dist-test builds the packages and runs this test", name)
	}
	if strings.HasPrefix(v, "dist/") {
		return filepath.Join(root, v)
	}
	return v
}

// sh runs a command, failing the test with its output when it fails.
func sh(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestDebInstall installs the .deb with dpkg, runs the installed unit's
// command as the unit says (its User and Group, EnvironmentFile,
// WorkingDirectory, StateDirectory; systemd does not run here), runs
// pushsend smoke against it, stops it with the unit's KillSignal, and
// removes then purges the package. It refuses to run where autopush is
// installed, and removes what it made on every way out.
func TestDebInstall(t *testing.T) {
	deb, version := distEnv(t, "AUTOPUSH_DIST_DEB"), distEnv(t, "AUTOPUSH_DIST_VERSION")
	_, err := exec.LookPath("dpkg")
	e2etest.Require(t, err == nil && os.Geteuid() == 0, "needs dpkg and root: run make dist-test as root on Debian")
	_, statErr := os.Stat("/var/lib/autopush")
	if exec.Command("dpkg-query", "-W", "autopush").Run() == nil || exec.Command("getent", "passwd", "autopush").Run() == nil ||
		exec.Command("getent", "group", "autopush").Run() == nil || statErr == nil {
		t.Fatal("autopush is installed here (the package, its user or /var/lib/autopush): the test would remove it")
	}
	t.Cleanup(func() { uninstall(t) })
	sh(t, "dpkg", "-i", deb)

	checkInstalled(t)
	for _, f := range packaged {
		if name, ok := strings.CutPrefix(f, "/usr/bin/"); ok {
			if out := sh(t, f, "version"); !strings.HasPrefix(out, name+" "+version+" (commit ") {
				t.Errorf("%s version says %q, want version %s", f, out, version)
			}
		}
	}
	p, env := startAsUnit(t)
	ws := "ws://" + env["AUTOPUSH__CONNECT_LISTEN"] + "/"
	if out, err := exec.Command("/usr/bin/pushsend", "smoke", "-ws", ws, "-timeout", "60s").CombinedOutput(); err != nil {
		t.Fatalf("pushsend smoke -ws %s: %v\n%s\nserver:\n%s", ws, err, out, p.Tail())
	} else {
		t.Logf("pushsend smoke -ws %s:\n%s", ws, out)
	}
	checkVersionRoute(t, env["AUTOPUSH__ENDPOINT_URL"], version)
	if err := p.Stop(2 * time.Minute); err != nil || p.ExitCode() != 0 {
		t.Errorf("SIGTERM (the unit's KillSignal): %v, exit %d\n%s", err, p.ExitCode(), p.Tail())
	}

	sh(t, "dpkg", "-r", "autopush")
	for _, f := range packaged {
		if _, err := os.Stat(f); (err == nil) != (f == "/etc/autopush/autopush.env") {
			t.Errorf("after dpkg -r, %s: %v (only the configuration file stays)", f, err)
		}
	}
	sh(t, "dpkg", "--purge", "autopush")
	if _, err := os.Stat("/etc/autopush/autopush.env"); err == nil {
		t.Error("dpkg --purge left /etc/autopush/autopush.env")
	}
	if exec.Command("dpkg-query", "-W", "autopush").Run() == nil {
		t.Error("dpkg still knows autopush after --purge")
	}
}

// uninstall purges the package, and deletes the user and the state
// directory it made (kept by the package on purpose: docs/operations.md).
func uninstall(t *testing.T) {
	for _, c := range [][]string{{"dpkg", "--purge", "autopush"}, {"userdel", "autopush"}, {"groupdel", "autopush"}} {
		if c[0] == "groupdel" && exec.Command("getent", "group", "autopush").Run() != nil {
			continue // userdel removed the user's own group
		}
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			t.Logf("cleanup: %s: %v %s", strings.Join(c, " "), err, out)
		}
	}
	if err := os.RemoveAll("/var/lib/autopush"); err != nil {
		t.Errorf("cleanup: %v", err)
	}
}

// checkInstalled: the files, the user, the env file readable by its
// group only, a dpkg configuration file.
func checkInstalled(t *testing.T) {
	t.Helper()
	list := sh(t, "dpkg-query", "-L", "autopush")
	for _, f := range packaged {
		if !strings.Contains(list, f+"\n") {
			t.Errorf("dpkg-query -L autopush lacks %s", f)
		}
	}
	if conf := sh(t, "dpkg-query", "-W", "-f=${Conffiles}", "autopush"); !strings.Contains(conf, "/etc/autopush/autopush.env ") {
		t.Errorf("conffiles %q lack the env file", conf)
	}
	if out := sh(t, "stat", "-c", "%U:%G %a", "/etc/autopush/autopush.env", "/var/lib/autopush"); out != "root:autopush 640\nautopush:autopush 700\n" {
		t.Errorf("owners and modes of the env file and the state directory:\n%s", out)
	}
	if out := sh(t, "getent", "passwd", "autopush"); !strings.HasSuffix(out, ":/var/lib/autopush:/usr/sbin/nologin\n") {
		t.Errorf("the autopush user: %s", out)
	}
}

// startAsUnit runs the installed unit's ExecStart as systemd would: as
// its User and Group with no new privileges, in its WorkingDirectory,
// with its EnvironmentFile, the StateDirectory made with its mode. The
// listeners move to free loopback ports (variables after the file's, as
// a second EnvironmentFile in a drop-in would set them).
func startAsUnit(t *testing.T) (p *proc.Proc, env map[string]string) {
	t.Helper()
	b, err := os.ReadFile(unitPath)
	et.Must(t, err, "read the installed unit")
	u := parseUnit(t, b)
	envPath := u.get("Service", "EnvironmentFile")
	b, err = os.ReadFile(envPath)
	et.Must(t, err, "read the installed env file")
	env = envFile(t, b)
	api := et.FreeAddr(t)
	for k, v := range map[string]string{"AUTOPUSH__CONNECT_LISTEN": et.FreeAddr(t), "AUTOPUSH__ROUTER_LISTEN": et.FreeAddr(t),
		"AUTOPUSH__ENDPOINT_LISTEN": api, "AUTOPUSH__ENDPOINT_URL": "http://" + api, "AUTOPUSH__METRICS_LISTEN": et.FreeAddr(t)} {
		env[k] = v
	}
	state := "/var/lib/" + u.get("Service", "StateDirectory")
	sh(t, "install", "-d", "-m", u.get("Service", "StateDirectoryMode"), "-o", u.get("Service", "User"), "-g", u.get("Service", "Group"), state)
	args := append([]string{"--reuid=" + u.get("Service", "User"), "--regid=" + u.get("Service", "Group"), "--init-groups", "--no-new-privs", "--"},
		strings.Fields(u.get("Service", "ExecStart"))...)
	cmd := exec.Command("setpriv", args...)
	cmd.Dir = u.get("Service", "WorkingDirectory")
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	p = e2etest.Start(t, cmd, single.ReadyMsg)
	// It runs as the user, and made its crypto-key in the state directory.
	if out := sh(t, "ps", "-o", "user=", "-p", fmt.Sprint(p.PID())); strings.TrimSpace(out) != u.get("Service", "User") {
		t.Errorf("the server runs as %q, want %s", out, u.get("Service", "User"))
	}
	var st syscall.Stat_t
	if err := syscall.Stat(env["AUTOPUSH__CRYPTO_KEY_FILE"], &st); err != nil || st.Mode&0o077 != 0 {
		t.Errorf("crypto-key file %s: %v, mode %o", env["AUTOPUSH__CRYPTO_KEY_FILE"], err, st.Mode)
	}
	if !strings.HasPrefix(filepath.Clean(env["AUTOPUSH__DATA_DIR"]), state+"/") {
		t.Errorf("data-dir %s is not under %s", env["AUTOPUSH__DATA_DIR"], state)
	}
	return p, env
}

// checkVersionRoute: the installed server's /__version__, with no
// version.json, names the packaged version and this checkout's commit.
func checkVersionRoute(t *testing.T, base, version string) {
	t.Helper()
	resp, err := http.Get(base + "/__version__")
	et.Must(t, err, "GET /__version__")
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var doc map[string]string
	if err := json.Unmarshal(out, &doc); resp.StatusCode != 200 || err != nil {
		t.Fatalf("/__version__: %d %s: %v", resp.StatusCode, out, err)
	}
	head := strings.TrimSpace(sh(t, "git", "-C", root, "rev-parse", "HEAD"))
	if doc["version"] != version || doc["commit"] != head {
		t.Errorf("/__version__ %s, want version %s and commit %s", out, version, head)
	}
}

// TestRPMContents: the .rpm holds the same files, the env file as
// %config(noreplace), and the scripts that make the user and stop the
// unit.
func TestRPMContents(t *testing.T) {
	rpm := distEnv(t, "AUTOPUSH_DIST_RPM")
	_, err := exec.LookPath("rpm")
	e2etest.Require(t, err == nil, "rpm not found: apt-get install rpm (make dist-test installs it as root)")
	// The rpm owns /etc/autopush too: erasing it removes the directory.
	files := strings.Fields(sh(t, "rpm", "-qlp", rpm))
	if want := append([]string{"/etc/autopush"}, packaged...); !slices.Equal(files, want) {
		t.Errorf("rpm -qlp: %v, want %v", files, want)
	}
	if out := sh(t, "rpm", "-qp", "--qf", "[%{FILENAMES} %{FILEFLAGS:fflags}\n]", rpm); !strings.Contains(out, "/etc/autopush/autopush.env cn\n") {
		t.Errorf("the env file is not %%config(noreplace):\n%s", out)
	}
	scripts := sh(t, "rpm", "-qp", "--scripts", rpm)
	for _, want := range []string{"useradd --system", "systemctl stop autopush.service", "daemon-reload"} {
		if !strings.Contains(scripts, want) {
			t.Errorf("the rpm's scripts lack %q", want)
		}
	}
}
