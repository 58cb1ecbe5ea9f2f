package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gobwas/ws"

	et "github.com/autopush-go/autopush/engine/enginetest"
	"github.com/autopush-go/autopush/stack/backup"
	"github.com/autopush-go/autopush/stack/single"
)

// The phases of a push or an ack in TestBackupUnderLoad, as the test saw
// it: before is before the backup command started.
const (
	beforeBackup = iota
	duringBackup
	afterBackup
)

// backupVals are the settings of a node over root: the store in
// root/store, the crypto-key in root/crypto_key, listeners on free ports.
// metrics is the metrics-listen address, the same for every node of a
// test: autopush backup finds the node there.
func backupVals(root, metrics string) map[string]string {
	return map[string]string{
		"connect-listen": "127.0.0.1:0", "router-listen": "127.0.0.1:0", "endpoint-listen": "127.0.0.1:0",
		"metrics-listen": metrics, "endpoint-url": "http://127.0.0.1:8082",
		"data-dir": filepath.Join(root, "store"), "crypto-key-file": filepath.Join(root, "crypto_key"),
		"msg-limit": "0", "drain-window": "1s",
		// Acks of a connected agent: with room for every push in flight no
		// direct delivery is refused busy, so its pushes are never stored
		// and its acks delete nothing (an ack's delete is made after the
		// ack: docs/operations.md, Backups, says what that means).
		"max-unacked": "1000",
	}
}

// command runs the binary with args then vals as flags (none of our
// AUTOPUSH__ variables) and returns its output and exit code.
func command(t *testing.T, vals map[string]string, args ...string) (string, int) {
	t.Helper()
	for k, v := range vals {
		args = append(args, "-"+k+"="+v)
	}
	cmd := exec.Command(binary(t), args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, single.Prefix+"__") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("run %v: %v", args, err)
	}
	return string(out), cmd.ProcessState.ExitCode()
}

// backupLedger: each push answered 201 and each ack sent, with the phase
// it happened in, and what arrived after the restore. Safe for
// concurrent use.
type backupLedger struct {
	mu       sync.Mutex
	phase    int
	answered map[string]int // payload -> phase of its 201
	acked    map[string]int // payload -> phase of its ack
	restored map[string]int // payload -> arrivals after the restore
}

func (l *backupLedger) set(phase int) { l.mu.Lock(); l.phase = phase; l.mu.Unlock() }

// record notes payload in m at the current phase: read after the event,
// so an event recorded before a phase happened before it began.
func (l *backupLedger) record(m map[string]int, payload string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	m[payload] = l.phase
}

func (l *backupLedger) count(agent string, phase int) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for p, ph := range l.answered {
		if ph == phase && strings.HasPrefix(p, agent+"-") {
			n++
		}
	}
	return n
}

// pushOnce posts one unique payload to ag and records a 201.
func (l *backupLedger) pushOnce(t *testing.T, client *http.Client, api string, ag *drainAgent) {
	ag.seq++
	payload := fmt.Sprintf("%s-%d", ag.name, ag.seq)
	req, _ := http.NewRequest(http.MethodPost, api+ag.endpoint, strings.NewReader(payload))
	req.Header.Set("TTL", "3600")
	req.Header.Set("Content-Encoding", "aes128gcm")
	resp, err := client.Do(req)
	if err != nil {
		t.Errorf("push %s: %v", payload, err)
		return
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode == http.StatusCreated {
		l.record(l.answered, payload)
	}
}

// TestBackupUnderLoad: autopush backup DIR while the single-node server
// (the built binary, embedded store) takes pushes and acks; the node
// stopped, autopush restore DIR into a fresh data-dir and crypto-key
// file, a fresh node on it, the agents back with their uaids. Every push
// answered 201 before the backup began to an agent not connected (so
// stored) arrives after the restore; nothing acked before the backup
// began arrives again (the offline agents' acked messages were deleted
// before it: Drain settles the node); a push answered while the backup
// ran or after may or may not, once at most.
func TestBackupUnderLoad(t *testing.T) {
	binary(t)
	root, metrics := t.TempDir(), et.FreeAddr(t)
	valsA := backupVals(filepath.Join(root, "a"), metrics)
	p := start(t, fromFlags, valsA)
	api, nodeURL := "http://"+p.Field("push_api"), "http://"+p.Field("node_api")
	l := &backupLedger{answered: map[string]int{}, acked: map[string]int{}, restored: map[string]int{}}
	client := &http.Client{Timeout: time.Minute}
	defer client.CloseIdleConnections()
	var online, offline []*drainAgent
	for i := range 6 {
		ag := &drainAgent{name: fmt.Sprint("ua", i), ledger: newDrainLedger()}
		c := ag.connect(t, p.Field("ws_listen"))
		if i%2 == 0 {
			c.Leave()
			offline = append(offline, ag)
			continue
		}
		online = append(online, ag)
		go backupReader(l, ag, c)
	}
	// The offline agents' first pushes: stored, then taken and acked (and
	// deleted: Drain settles the node) before the backup.
	for _, ag := range offline {
		for range 5 {
			l.pushOnce(t, client, api, ag)
		}
		c := ag.connect(t, p.Field("ws_listen"))
		et.Drain(t, nodeURL, c, func(text string) {
			if m := ag.notification(text); m != nil {
				c.Ack(m.chid, m.version)
				l.record(l.acked, m.payload)
			}
		})
		c.Leave()
	}
	stop, pushed := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(pushed)
		for {
			for _, ag := range everyone(online, offline) {
				select {
				case <-stop:
					return
				default:
				}
				l.pushOnce(t, client, api, ag)
			}
		}
	}()
	waitPushes(t, l, everyone(online, offline), beforeBackup, 10)
	bk := filepath.Join(root, "backup")
	l.set(duringBackup)
	out, code := command(t, valsA, "backup", bk)
	l.set(afterBackup)
	if code != 0 || !strings.Contains(out, "the running node on metrics-listen "+metrics+" checkpointed the store") {
		t.Fatalf("autopush backup exited %d: %s", code, out)
	}
	waitPushes(t, l, everyone(online, offline), afterBackup, 3)
	close(stop)
	<-pushed
	stopGracefully(t, p)

	valsB := backupVals(filepath.Join(root, "b"), metrics)
	out, code = command(t, valsB, "restore", bk)
	if code != 0 {
		t.Fatalf("autopush restore exited %d: %s", code, out)
	}
	sameFile(t, valsA["crypto-key-file"], valsB["crypto-key-file"])
	q := start(t, fromFlags, valsB)
	for _, ag := range everyone(online, offline) {
		c := ag.connect(t, q.Field("ws_listen"))
		et.Drain(t, "http://"+q.Field("node_api"), c, func(text string) {
			if m := ag.notification(text); m != nil {
				c.Ack(m.chid, m.version)
				l.mu.Lock()
				l.restored[m.payload]++
				l.mu.Unlock()
			}
		})
		c.Leave()
	}
	stopGracefully(t, q)
	l.check(t, offline)
}

// everyone is both groups of agents in one new slice.
func everyone(a, b []*drainAgent) []*drainAgent {
	return append(append([]*drainAgent(nil), a...), b...)
}

// backupReader acks every notification c gets as it arrives, until the
// connection ends.
func backupReader(l *backupLedger, ag *drainAgent, c *et.Client) {
	defer c.Close()
	for {
		text, _, err := c.Next(2 * time.Minute)
		if err != nil {
			return
		}
		if m := ag.notification(text); m != nil {
			msg := fmt.Sprintf(`{"messageType":"ack","updates":[{"channelID":%q,"version":%q,"code":100}]}`, m.chid, m.version)
			if c.TrySendFrame(ws.OpText, []byte(msg)) == nil {
				l.record(l.acked, m.payload)
			}
		}
	}
}

// waitPushes waits until each agent has n pushes answered 201 in phase.
func waitPushes(t *testing.T, l *backupLedger, agents []*drainAgent, phase, n int) {
	t.Helper()
	et.Eventually(t, 2*time.Minute, fmt.Sprintf("%d pushes to each agent", n), func() bool {
		for _, ag := range agents {
			if l.count(ag.name, phase) < n {
				return false
			}
		}
		return true
	})
}

// check fails on a push answered 201 before the backup to an offline
// agent that did not come back, on anything acked before the backup
// that came back, and on anything that came back twice.
func (l *backupLedger) check(t *testing.T, offline []*drainAgent) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var lost, again, twice []string
	back := map[int]int{}
	for p, phase := range l.answered {
		stored := false
		for _, ag := range offline {
			stored = stored || strings.HasPrefix(p, ag.name+"-")
		}
		ackPhase, acked := l.acked[p]
		switch {
		case l.restored[p] > 1:
			twice = append(twice, p)
		case acked && ackPhase == beforeBackup && l.restored[p] > 0:
			again = append(again, p)
		case stored && phase == beforeBackup && !(acked && ackPhase == beforeBackup) && l.restored[p] == 0:
			lost = append(lost, p)
		}
		if l.restored[p] > 0 {
			back[phase]++
		}
	}
	t.Logf("%d pushes answered 201, %d acked; back after the restore: %d answered before the backup, %d while it ran, %d after",
		len(l.answered), len(l.acked), back[beforeBackup], back[duringBackup], back[afterBackup])
	for what, list := range map[string][]string{
		"answered 201 before the backup to an agent not connected, not back after the restore": lost,
		"acked before the backup, back after the restore":                                      again,
		"back twice after the restore":                                                         twice,
	} {
		if len(list) > 0 {
			t.Errorf("%d pushes %s: %v", len(list), what, list[:min(len(list), 20)])
		}
	}
}

// sameFile fails unless a and b hold the same bytes.
func sameFile(t *testing.T, a, b string) {
	t.Helper()
	x, errA := os.ReadFile(a)
	y, errB := os.ReadFile(b)
	if errA != nil || errB != nil || !bytes.Equal(x, y) {
		t.Fatalf("%s and %s differ (%v, %v)", a, b, errA, errB)
	}
}

// TestBackupStoppedAndRefusals: autopush backup of a store no node holds
// (the command checkpoints it), restored and served; and each refusal,
// which changes nothing: no DIR, a DIR whose parent is missing, a
// non-empty DIR, a restore over a store, a restore from a directory
// that is no backup, -force over a running node's store, and the node's
// backup route without the token or with a relative dir.
func TestBackupStoppedAndRefusals(t *testing.T) {
	binary(t)
	root, metrics := t.TempDir(), et.FreeAddr(t)
	valsA := backupVals(filepath.Join(root, "a"), metrics)
	p := start(t, fromFlags, valsA)
	ag := &drainAgent{name: "ua", ledger: newDrainLedger()}
	ag.connect(t, p.Field("ws_listen")).Leave()
	l := &backupLedger{answered: map[string]int{}, acked: map[string]int{}, restored: map[string]int{}}
	for range 3 {
		l.pushOnce(t, http.DefaultClient, "http://"+p.Field("push_api"), ag)
	}
	stopGracefully(t, p)

	bk := filepath.Join(root, "backup")
	refuse := func(vals map[string]string, want string, args ...string) {
		t.Helper()
		if out, code := command(t, vals, args...); code != 1 || !strings.Contains(out, want) {
			t.Errorf("autopush %v: exit %d, %q; want exit 1 saying %q", args, code, out, want)
		}
	}
	refuse(valsA, "usage: autopush backup DIR", "backup")
	refuse(valsA, "its parent directory does not exist", "backup", filepath.Join(root, "missing", "backup"))
	if out, code := command(t, valsA, "backup", bk); code != 0 || !strings.Contains(out, "no node held the store") {
		t.Fatalf("autopush backup of a stopped store: exit %d: %s", code, out)
	}
	refuse(valsA, "exists and is not empty", "backup", bk)
	before := listDir(t, valsA["data-dir"])
	refuse(valsA, "data-dir "+valsA["data-dir"]+" is not empty", "restore", bk)
	refuse(valsA, "is not a backup", "restore", root)
	if after := listDir(t, valsA["data-dir"]); after != before {
		t.Errorf("a refused restore changed the data-dir: %s, was %s", after, before)
	}

	valsB := backupVals(filepath.Join(root, "b"), metrics)
	if out, code := command(t, valsB, "restore", bk); code != 0 {
		t.Fatalf("autopush restore: exit %d: %s", code, out)
	}
	q := start(t, fromFlags, valsB)
	c := ag.connect(t, q.Field("ws_listen"))
	et.Drain(t, "http://"+q.Field("node_api"), c, func(text string) {
		if m := ag.notification(text); m != nil {
			c.Ack(m.chid, m.version)
			l.restored[m.payload]++
		}
	})
	c.Leave()
	if len(l.restored) != 3 || len(l.answered) != 3 {
		t.Errorf("after the restore: %v back, of %v answered 201", l.restored, l.answered)
	}
	refuse(valsB, "stop the node first", "restore", "-force", bk)
	key, err := os.ReadFile(valsB["crypto-key-file"])
	et.Must(t, err, "read the crypto-key file")
	checkRoute(t, metrics, string(key), filepath.Join(root, "routed"))
	stopGracefully(t, q)
}

// checkRoute asks the node on metrics (crypto-key key) for a backup into
// dir without the token, with another key's, then with the token and a
// relative dir: each gets its error, and nothing is written.
func checkRoute(t *testing.T, metrics, key, dir string) {
	t.Helper()
	for _, tc := range []struct {
		auth, dir string
		status    int
		errno     any
	}{
		{"", dir, http.StatusUnauthorized, 109.0},
		{"Bearer " + backup.Token("not the key"), dir, http.StatusUnauthorized, 109.0},
		{"Bearer " + backup.Token(key), "relative/dir", http.StatusBadRequest, nil},
	} {
		req, _ := http.NewRequest(http.MethodPost, "http://"+metrics+"/__backup__", strings.NewReader(fmt.Sprintf(`{"dir":%q}`, tc.dir)))
		if tc.auth != "" {
			req.Header.Set("Authorization", tc.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		et.Must(t, err, "POST /__backup__")
		var body map[string]any
		json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || body["errno"] != tc.errno {
			t.Errorf("POST /__backup__ (%q, %s): %d %v, want %d errno %v", tc.auth, tc.dir, resp.StatusCode, body, tc.status, tc.errno)
		}
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused backup request made %s: %v", dir, err)
	}
}

// listDir names dir's entries with their sizes.
func listDir(t *testing.T, dir string) string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	et.Must(t, err, "read "+dir)
	var b strings.Builder
	for _, e := range entries {
		info, _ := e.Info()
		fmt.Fprintf(&b, "%s:%d ", e.Name(), info.Size())
	}
	return b.String()
}
