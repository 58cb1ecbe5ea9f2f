package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/autopush-go/autopush/apitier/apitiertest"
	"github.com/autopush-go/autopush/stack"
	"github.com/autopush-go/autopush/stack/stacktest"
)

// listener is a pushsend listen run in the background.
type listener struct {
	lines  chan string
	done   chan error
	cancel context.CancelFunc
	stderr *apitiertest.SyncBuffer
}

func startListen(t *testing.T, args ...string) *listener {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	l := &listener{lines: make(chan string, 16), done: make(chan error, 1), cancel: cancel, stderr: new(apitiertest.SyncBuffer)}
	go func() {
		err := run(ctx, append([]string{"listen"}, args...), pw, l.stderr)
		pw.Close()
		l.done <- err
	}()
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			l.lines <- sc.Text()
		}
		close(l.lines)
	}()
	t.Cleanup(func() {
		cancel()
		<-l.done
	})
	return l
}

// next is the next line listen prints on standard output.
func (l *listener) next(t *testing.T) string {
	t.Helper()
	select {
	case s, ok := <-l.lines:
		if !ok {
			t.Fatalf("listen ended; its notes: %s", l.stderr.String())
		}
		return s
	case <-time.After(30 * time.Second):
		t.Fatalf("no line from listen; its notes: %s", l.stderr.String())
	}
	return ""
}

// message is the next message listen prints.
func (l *listener) message(t *testing.T) received {
	t.Helper()
	var r received
	line := l.next(t)
	if err := json.Unmarshal([]byte(line), &r); err != nil || r.Version == "" {
		t.Fatalf("message line %q: %v", line, err)
	}
	return r
}

// wait is listen's result once it ended by itself.
func (l *listener) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-l.done:
		l.done <- err // for the cleanup
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("listen did not end")
	}
	return nil
}

// stop interrupts listen as Ctrl-C would and returns its result.
func (l *listener) stop(t *testing.T) error {
	l.cancel()
	return l.wait(t)
}

func deref(p *string) string {
	if p == nil {
		return "<none>"
	}
	return *p
}

func textOf(t *testing.T, r received) string {
	t.Helper()
	if r.Text == nil {
		t.Fatalf("message without text: %+v", r)
	}
	return *r.Text
}

// TestListen: the test user agent subscribes bound to a VAPID key and
// prints a subscription that pushsend send delivers to; interrupted and
// run again with its state file, it is the same subscription and gets
// what was pushed while it was away; -no-ack leaves a message to be sent
// again; -new is another subscription.
func TestListen(t *testing.T) {
	st := stacktest.Start(t)
	dir := t.TempDir()
	state, subFile, keyFile := filepath.Join(dir, "state.json"), filepath.Join(dir, "sub.json"), filepath.Join(dir, "vapid.json")
	keysOut, _, err := runT(t, "keys")
	var pair struct{ PublicKey, PrivateKey string }
	if err != nil || json.Unmarshal([]byte(keysOut), &pair) != nil {
		t.Fatalf("keys: %v %q", err, keysOut)
	}
	os.WriteFile(keyFile, []byte(keysOut), 0o600) // -vapid-key @file takes keys' output
	ws := "ws://" + st.WSAddr() + "/"
	send := func(sub, text string) {
		t.Helper()
		if out, errs, err := runT(t, "send", "-sub", sub, "-data", text, "-vapid-private", pair.PrivateKey, "-ttl", "300"); err != nil {
			t.Fatalf("send %q: %v\n%s%s", text, err, out, errs)
		}
	}

	args := []string{"-ws", ws, "-state", state, "-vapid-key", "@" + keyFile, "-sub-file", subFile}
	l := startListen(t, args...)
	sub := l.next(t)
	var parsed subscription
	if err := json.Unmarshal([]byte(sub), &parsed); err != nil || !strings.HasPrefix(parsed.Endpoint, st.EndpointURL()+"/wpush/v2/") ||
		parsed.Keys.P256DH == "" || parsed.Keys.Auth == "" {
		t.Fatalf("subscription line %q: %v (want a v2 endpoint under %s)", sub, err, st.EndpointURL())
	}
	if b, _ := os.ReadFile(subFile); strings.TrimSpace(string(b)) != sub {
		t.Fatalf("-sub-file holds %q, printed %q", b, sub)
	}
	if fi, err := os.Stat(state); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("state file: %v %v, want mode 0600", fi, err)
	}
	send(sub, "while listening")
	if r := l.message(t); textOf(t, r) != "while listening" || r.Headers["encoding"] != "aes128gcm" {
		t.Fatalf("got %+v (text %q)", r, deref(r.Text))
	}
	if err := l.stop(t); err != nil {
		t.Fatalf("interrupted listen: %v", err)
	}

	// Away: stored, then received by the same subscription.
	send(sub, "while away")
	l = startListen(t, append(args, "-count", "1")...)
	if again := l.next(t); again != sub {
		t.Fatalf("second run's subscription %q, first %q", again, sub)
	}
	if r := l.message(t); textOf(t, r) != "while away" {
		t.Fatalf("got %+v (text %q)", r, deref(r.Text))
	}
	if err := l.wait(t); err != nil {
		t.Fatalf("listen -count 1: %v", err)
	}

	// Not acked: sent again on the next connection.
	send(sub, "not acked")
	l = startListen(t, append(args, "-count", "1", "-no-ack")...)
	l.next(t)
	if r := l.message(t); textOf(t, r) != "not acked" {
		t.Fatalf("got %+v (text %q)", r, deref(r.Text))
	}
	l.wait(t)
	l = startListen(t, append(args, "-count", "1")...)
	l.next(t)
	if r := l.message(t); textOf(t, r) != "not acked" {
		t.Fatalf("after -no-ack, got %+v", r)
	}
	l.wait(t)

	// -new: another user agent, another endpoint.
	l = startListen(t, append(args, "-new")...)
	if other := l.next(t); other == sub {
		t.Fatal("-new printed the old subscription")
	}
	l.stop(t)
}

// TestListenRefusals: bad flags are usage errors and a damaged state
// file is named, nothing connected.
func TestListenRefusals(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte("{"), 0o600)
	for name, args := range map[string][]string{
		"bad key":        {"-vapid-key", "nope"},
		"missing file":   {"-vapid-key", "@" + filepath.Join(dir, "none")},
		"extra argument": {"x"},
		"negative count": {"-count", "-1"},
	} {
		if _, _, err := runT(t, append([]string{"listen", "-state", filepath.Join(dir, "s.json")}, args...)...); !errors.Is(err, errUsage) {
			t.Errorf("%s: %v, want a usage error", name, err)
		}
	}
	_, _, err := runT(t, "listen", "-state", bad, "-ws", "ws://127.0.0.1:1/")
	if err == nil || !strings.Contains(err.Error(), "not a pushsend listen state file") {
		t.Errorf("damaged state: %v", err)
	}
	// Nothing listening: a clear failure, not a hang.
	if _, _, err := runT(t, "listen", "-state", filepath.Join(dir, "s.json"), "-ws", "ws://127.0.0.1:1/"); err == nil || errors.Is(err, errUsage) {
		t.Errorf("listen against nothing: %v", err)
	}
}

// TestSendCountReceipts: send -count sends that many pushes and sums up
// their answers and, with -receipt, their receipts: delivered to
// pushsend listen (which acks), expired for a user agent that is away,
// refused by status; the exit status says whether all were delivered.
func TestSendCountReceipts(t *testing.T) {
	st := stacktest.StartWith(t, stacktest.Options{Config: func(c *stack.Config) {
		c.API.Receipts, c.API.FateSweepInterval = true, 100*time.Millisecond
	}})
	pub, priv := keys(t)
	l := startListen(t, "-ws", "ws://"+st.WSAddr()+"/", "-state", filepath.Join(t.TempDir(), "s.json"), "-vapid-key", pub)
	sub := l.next(t)
	out, errs, err := runT(t, "send", "-sub", sub, "-data", "many", "-vapid-private", priv, "-receipt", "-count", "5")
	if err != nil || out != "5 pushes: 5 accepted, 0 refused\nreceipts: 5 delivered, 0 not delivered\n" {
		t.Fatalf("send -count 5 -receipt: %v\n%q%s", err, out, errs)
	}
	for range 5 {
		if r := l.message(t); textOf(t, r) != "many" {
			t.Fatalf("listen got %+v", r)
		}
	}

	away := st.Left(t)
	out, _, err = runT(t, "send", "-sub", away.SubscriptionJSON(), "-data", "gone", "-vapid-private", priv, "-receipt", "-count", "3", "-ttl", "0")
	if err == nil || !strings.Contains(err.Error(), "3 of 3 pushes not delivered") ||
		!strings.Contains(out, "receipts: 0 delivered, 3 not delivered: expired 3") {
		t.Fatalf("to a user agent away, TTL 0: %v\n%s", err, out)
	}
	out, _, err = runT(t, "send", "-endpoint", st.EndpointURL()+"/wpush/v1/gAAAAAnotatoken", "-count", "2", "-json")
	var sum summary
	if err == nil || json.Unmarshal([]byte(out), &sum) != nil || sum.Accepted != 0 || sum.Refused["404 Not Found"] != 2 {
		t.Fatalf("refused pushes: %v\n%s", err, out)
	}
	if _, _, err := runT(t, "send", "-endpoint", sub, "-count", "0"); !errors.Is(err, errUsage) {
		t.Fatalf("-count 0: %v", err)
	}
}
