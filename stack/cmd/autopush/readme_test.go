package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/autopush-go/autopush/internal/proc"
	"github.com/autopush-go/autopush/sender/logprovider"
	"github.com/autopush-go/autopush/stack/single"
	"github.com/autopush-go/autopush/tools/e2e/e2etest"

	et "github.com/autopush-go/autopush/engine/enginetest"
)

// root is the repository's root, from this package's directory.
const root = "../../.."

// makeRunArgs are the arguments make run gives the server: the run
// target's recipe after the package it runs.
func makeRunArgs(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "Makefile"))
	et.Must(t, err, "read the Makefile")
	_, recipe, ok := strings.Cut(string(b), "\nrun:")
	if !ok {
		t.Fatal("the Makefile has no run target")
	}
	var cmd strings.Builder
	for _, line := range strings.Split(recipe, "\n")[1:] {
		line = strings.TrimSpace(line)
		cmd.WriteString(strings.TrimSuffix(line, "\\") + " ")
		if !strings.HasSuffix(line, "\\") {
			break
		}
	}
	_, args, ok := strings.Cut(cmd.String(), "./stack/cmd/autopush ")
	if !ok {
		t.Fatalf("make run's recipe does not run ./stack/cmd/autopush: %q", cmd.String())
	}
	return strings.Fields(args)
}

// makeRun starts the server as make run starts it (its recipe's
// arguments, then extra), in dir, on free loopback ports in place of make
// run's: it returns what each of make run's addresses became.
func makeRun(t *testing.T, dir string, extra ...string) (map[string]string, *proc.Proc) {
	t.Helper()
	addrs := map[string]string{}
	for _, a := range []string{"127.0.0.1:8080", "127.0.0.1:8081", "127.0.0.1:8082", "127.0.0.1:8443"} {
		addrs[a] = et.FreeAddr(t)
	}
	var args []string
	for _, a := range makeRunArgs(t) {
		for from, to := range addrs {
			a = strings.ReplaceAll(a, from, to)
		}
		args = append(args, a)
	}
	// make run's metrics port may be taken here.
	args = append(append(args, "-metrics-listen", et.FreeAddr(t)), extra...)
	cmd := exec.Command(binary(t), args...)
	cmd.Dir = dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, single.Prefix+"__") && !strings.HasPrefix(kv, "SSL_CERT_FILE=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	return addrs, e2etest.Start(t, cmd, single.ReadyMsg)
}

// needFile fails (in CI) or skips when the repository has no path, which
// install makes.
func needFile(t *testing.T, what, path, install string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(root, path)); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is not installed: %s", what, install)
		}
		t.Skipf("%s is not installed (%s)", what, install)
	}
}

// readmeBlock is the first sh block of README.md's section title.
func readmeBlock(t *testing.T, title string) string {
	t.Helper()
	return readmeBlocks(t, title)[0]
}

// readmeBlocks are the sh blocks of README.md's section title.
func readmeBlocks(t *testing.T, title string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	et.Must(t, err, "read README.md")
	_, section, ok := strings.Cut(string(b), "\n## "+title+"\n")
	if !ok {
		t.Fatalf("README.md has no section %q", title)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var blocks []string
	for {
		_, rest, ok := strings.Cut(section, "```sh\n")
		if !ok {
			break
		}
		block, after, _ := strings.Cut(rest, "```")
		blocks, section = append(blocks, block), after
	}
	if len(blocks) == 0 {
		t.Fatalf("README.md's %q has no sh block", title)
	}
	return blocks
}

// shell is an sh reading commands from a pipe: variables persist from
// one step to the next, and the test can wait between steps.
type shell struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

func startShell(t *testing.T, dir string) *shell {
	t.Helper()
	cmd := exec.Command("sh")
	cmd.Dir = dir
	// Its own process group: what a step leaves running (a background
	// command) is stopped with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	in, err := cmd.StdinPipe()
	et.Must(t, err, "sh stdin")
	out, err := cmd.StdoutPipe()
	et.Must(t, err, "sh stdout")
	cmd.Stderr = cmd.Stdout
	et.Must(t, cmd.Start(), "start sh")
	t.Cleanup(func() {
		in.Close()
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
	})
	return &shell{cmd: cmd, in: in, out: bufio.NewReader(out)}
}

// run runs a step and returns its output and exit status.
func (s *shell) run(t *testing.T, step string) (string, int) {
	t.Helper()
	fmt.Fprintf(s.in, "%s\nprintf '\\n@@end %%s\\n' \"$?\"\n", step)
	type result struct {
		out    string
		status int
		err    error
	}
	done := make(chan result, 1)
	go func() {
		var b strings.Builder
		for {
			line, err := s.out.ReadString('\n')
			if err != nil {
				done <- result{b.String(), -1, err}
				return
			}
			if rest, ok := strings.CutPrefix(line, "@@end "); ok {
				var status int
				fmt.Sscan(rest, &status)
				done <- result{strings.TrimRight(b.String(), "\n"), status, nil}
				return
			}
			b.WriteString(line)
		}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatalf("step %q: %v; output %q", step, r.err, r.out)
		}
		return r.out, r.status
	case <-time.After(time.Minute):
		s.cmd.Process.Kill()
		t.Fatalf("step %q ran over a minute", step)
	}
	return "", 0
}

// value is a shell variable's value.
func (s *shell) value(t *testing.T, name string) string {
	out, _ := s.run(t, `printf '%s' "$`+name+`"`)
	return out
}

var (
	created    = regexp.MustCompile(`(?m)^HTTP/1\.1 201 Created\r?$`)
	locationRE = regexp.MustCompile(`(?mi)^location: /push/([0-9a-f-]{36})\r?$`)
	uuidRE     = regexp.MustCompile(`^[0-9a-f-]{36}$`)
)

// TestReadmeSender runs the commands of README.md's "Send a mobile push
// (the sender)" against the single-node server started as make run
// starts it (the Makefile's run recipe, on free loopback ports, in a
// fresh directory), one step (a comment and its command) at a time in
// one sh, and checks each answer: the key make run made and printed
// with a curl line, a push accepted and its id kept, the push SENT
// through the log provider, listed by state and found by its pushKey, a
// POST repeated with one Idempotency-Key stored once, a scheduled push
// accepted and cancelled (FAILED), and the log provider's lines. A step the test does not know fails it:
// the README and this test change together.
func TestReadmeSender(t *testing.T) {
	binary(t) // built (or skipped with -short) before anything starts
	if _, err := exec.LookPath("curl"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("curl is not installed: apt-get install curl")
		}
		t.Skip("curl is not installed (apt-get install curl)")
	}
	dir := t.TempDir()
	const readmeAPI = "127.0.0.1:8082"
	addrs, p := makeRun(t, dir)
	api := addrs[readmeAPI]

	b, err := os.ReadFile(filepath.Join(dir, "data", "push_api_key"))
	et.Must(t, err, "read the key make run made")
	key := strings.TrimSpace(string(b))
	if st, err := os.Stat(filepath.Join(dir, "data", "push_api_key")); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("the key file: %v, mode %v; want 0600", err, st.Mode().Perm())
	}
	et.Eventually(t, et.Patience, "the key printed with a curl line", func() bool {
		out := string(p.Output())
		return strings.Contains(out, "    "+key+"\n") && strings.Contains(out, "curl -i -X POST http://"+api+"/push -H 'Authorization: Bearer "+key+"'")
	})

	sh := startShell(t, dir)
	var steps []string
	for _, step := range strings.Split(strings.TrimSpace(readmeBlock(t, "Send a mobile push (the sender)")), "\n\n") {
		steps = append(steps, strings.ReplaceAll(step, readmeAPI, api))
	}
	get := func(path string) map[string]any {
		out, status := sh.run(t, `curl -s "$API`+path+`" -H "Authorization: Bearer $KEY"`)
		var m map[string]any
		if status != 0 || json.Unmarshal([]byte(out), &m) != nil {
			t.Fatalf("GET %s: status %d, %q", path, status, out)
		}
		return m
	}
	var id, sid string
	for _, step := range steps {
		out, status := sh.run(t, step)
		if status != 0 {
			t.Fatalf("step %q exited %d: %s", step, status, out)
		}
		cmdText := step[strings.Index(step, "\n")+1:] // after its comment
		switch {
		case strings.HasPrefix(step, "KEY="):
			if got := sh.value(t, "KEY"); got != key || out != "" {
				t.Fatalf("KEY is %q (output %q), want the key in data/push_api_key", got, out)
			}
		case strings.HasPrefix(cmdText, "ID=$(curl"):
			id = sh.value(t, "ID")
			if !uuidRE.MatchString(id) {
				t.Fatalf("ID is %q after %q", id, step)
			}
			// The README says the push gets SENT: wait for it, so the
			// steps after see it so.
			et.Eventually(t, et.Patience, "the push to be SENT", func() bool { return get("/push/" + id)["state"] == "SENT" })
		case id != "" && strings.HasPrefix(cmdText, "curl -s $API/push/$ID "):
			var push map[string]any
			if err := json.Unmarshal([]byte(out), &push); err != nil || push["id"] != id || push["state"] != "SENT" || push["provider"] != logprovider.Name {
				t.Fatalf("GET by id: %v %s; want the push SENT through the log provider", err, out)
			}
		case id != "" && strings.HasPrefix(cmdText, `curl -s "$API/push?state=SENT`):
			if !strings.Contains(out, `"id":"`+id+`"`) || !strings.Contains(out, `"next"`) {
				t.Fatalf("list by state: %s; want the push %s and a next", out, id)
			}
		case id != "" && strings.HasPrefix(cmdText, `curl -s "$API/push?pushKey=user-2"`):
			var page struct {
				Pushes []map[string]any `json:"pushes"`
			}
			if err := json.Unmarshal([]byte(out), &page); err != nil || len(page.Pushes) != 1 || page.Pushes[0]["id"] != id {
				t.Fatalf("search by pushKey: %v %s; want the one push %s", err, out, id)
			}
		case strings.HasPrefix(cmdText, "for try in 1 2;") && strings.Contains(cmdText, "Idempotency-Key"):
			locs := locationRE.FindAllStringSubmatch(out, -1)
			if len(locs) != 2 || locs[0][1] != locs[1][1] {
				t.Fatalf("two POSTs with one Idempotency-Key: %q; want the same Location twice", out)
			}
			if len(get("/push?pushKey=user-3")["pushes"].([]any)) != 1 {
				t.Fatal("two POSTs with one Idempotency-Key stored more than one push")
			}
		case strings.HasPrefix(cmdText, "curl -si $API/push ") && strings.Contains(cmdText, "-d '"):
			if !created.MatchString(out) || !locationRE.MatchString(out) {
				t.Fatalf("POST %q: want 201 Created with a Location, got:\n%s", step, out)
			}
		case strings.HasPrefix(cmdText, "SID=$(curl"):
			sid = sh.value(t, "SID")
			if !uuidRE.MatchString(sid) || get("/push/" + sid)["state"] != "SCHEDULED" {
				t.Fatalf("SID is %q after %q; want a SCHEDULED push's id", sid, step)
			}
		case sid != "" && strings.HasPrefix(cmdText, "curl -si -X DELETE $API/push/$SID "):
			if !regexp.MustCompile(`^HTTP/1\.1 204 No Content\r?\n`).MatchString(out) {
				t.Fatalf("DELETE: want 204, got:\n%s", out)
			}
			if st := get("/push/" + sid)["state"]; st != "FAILED" {
				t.Fatalf("the cancelled push is %v, want FAILED", st)
			}
		case id != "" && strings.HasPrefix(cmdText, "tail ") && strings.Contains(cmdText, "data/pushes.log"):
			lines := strings.Split(out, "\n")
			found := false
			for _, l := range lines {
				var rec logprovider.Line
				if err := json.Unmarshal([]byte(l), &rec); err != nil {
					t.Fatalf("pushes.log line %q: %v", l, err)
				}
				found = found || rec.ID == id && rec.PushKey == "user-2" && rec.Message == "Hi"
			}
			if len(lines) != 2 || !found {
				t.Fatalf("tail of pushes.log: %q; want two lines, one the push %s", out, id)
			}
		default:
			t.Fatalf("README step without a check here (add one): %q", step)
		}
	}
	if id == "" {
		t.Fatal("no README step kept a push's id")
	}
	if !strings.Contains(string(p.Output()), `"msg":"POST /push records each push in a file instead of sending it (the log provider)"`) {
		t.Errorf("the start does not say pushes go to the log provider:\n%s", p.Tail())
	}
}

// TestReadmeLibraries runs README.md's "Push with your library": the
// server started as make run starts it (on free loopback ports, in a
// fresh directory, which the steps' data/ paths name), pushsend listen as
// the user agent, and npm web-push, pywebpush and webpush-go each pushing
// with their own documented call over https, trusting the development CA
// through the export line the server printed. Each push is answered 201
// and listen prints each message decrypted. listen runs in the
// background with -count (the README gives it a terminal of its own).
func TestReadmeLibraries(t *testing.T) {
	needFile(t, "npm web-push", "tools/webpush-node/node_modules/web-push", "make node-deps")
	needFile(t, "pywebpush", "tools/examples/pywebpush/.venv/bin/python", "make pywebpush")
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatal("node is not installed: apt-get install nodejs")
	}
	dir := t.TempDir()
	addrs, p := makeRun(t, dir)
	ws, tlsAPI := addrs["127.0.0.1:8080"], addrs["127.0.0.1:8443"]
	data, err := filepath.Abs(filepath.Join(dir, "data"))
	et.Must(t, err, "data directory")
	ca := filepath.Join(data, "tls", "ca.pem")
	et.Eventually(t, et.Patience, "the line trusting the development CA", func() bool {
		return strings.Contains(string(p.Output()), "export NODE_EXTRA_CA_CERTS="+ca+" REQUESTS_CA_BUNDLE="+ca+" SSL_CERT_FILE="+ca)
	})

	repo, err := filepath.Abs(root)
	et.Must(t, err, "the repository's root")
	sh := startShell(t, repo)
	// The README's steps name make run's data directory as data/ (or
	// $PWD/data/) from the repository's root: here it is the server's.
	dataPath := regexp.MustCompile(`(\$PWD/)?\bdata/`)
	sh.run(t, "export PUSHSEND_WS=ws://"+ws+"/") // listen's -ws default: the server's websocket
	// listen's default state file is in the user's config directory: the
	// test's own, not the user's running it.
	sh.run(t, "export XDG_CONFIG_HOME="+filepath.Join(dir, "config"))
	listenOut := filepath.Join(dir, "listen.out")
	var sent []string
	steps := 0
	for _, block := range readmeBlocks(t, "Push with your library") {
		for _, step := range strings.Split(strings.TrimSpace(block), "\n\n") {
			steps++
			step = dataPath.ReplaceAllString(step, data+"/")
			cmdText := step[strings.Index(step, "\n")+1:]
			switch {
			case strings.HasPrefix(cmdText, "go run ./tools/cmd/pushsend listen "):
				if _, status := sh.run(t, cmdText+" -count 3 >"+listenOut+" 2>&1 &"); status != 0 {
					t.Fatalf("listen: status %d", status)
				}
				et.Eventually(t, et.Patience, "listen's subscription file", func() bool {
					_, err := os.Stat(filepath.Join(data, "sub.json"))
					return err == nil
				})
				continue
			case strings.HasPrefix(cmdText, "export "):
				if !strings.Contains(cmdText, "SSL_CERT_FILE="+ca) {
					t.Fatalf("the export step does not trust %s: %q", ca, cmdText)
				}
			}
			out, status := sh.run(t, step)
			if status != 0 {
				t.Fatalf("step %q exited %d: %s", step, status, out)
			}
			if m := regexp.MustCompile(`'(hello from [^']+)'$`).FindStringSubmatch(cmdText); m != nil {
				if !strings.HasPrefix(out, "201 https://"+tlsAPI+"/m/") {
					t.Fatalf("step %q: %q, want 201 and a Location on the https endpoint", step, out)
				}
				sent = append(sent, m[1])
			}
		}
	}
	if len(sent) != 3 {
		t.Fatalf("%d library pushes in the README's steps (%d steps), want web-push's, pywebpush's and webpush-go's", len(sent), steps)
	}
	var got []string
	et.Eventually(t, et.Patience, "listen to print the three messages", func() bool {
		b, _ := os.ReadFile(listenOut)
		got = got[:0]
		for _, line := range strings.Split(string(b), "\n") {
			var m struct{ Text *string }
			if json.Unmarshal([]byte(line), &m) == nil && m.Text != nil {
				got = append(got, *m.Text)
			}
		}
		return len(got) == len(sent)
	})
	for i := range sent {
		if got[i] != sent[i] {
			b, _ := os.ReadFile(listenOut)
			t.Fatalf("listen printed %q, the libraries sent %q\n%s", got, sent, b)
		}
	}
}
