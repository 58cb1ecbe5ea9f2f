package proc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The children are this test binary, re-executed with childEnv naming
// what to do.
const childEnv = "PROC_TEST_CHILD"

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		child(mode)
		return
	}
	os.Exit(m.Run())
}

const startLine = `{"Type":"test","Fields":{"msg":"child started","listen":"127.0.0.1:1"}}`

// child is the re-executed test binary.
func child(mode string) {
	term := make(chan os.Signal, 1)
	if mode == "serve" || mode == "leader" || mode == "stubborn" {
		signal.Notify(term, syscall.SIGTERM) // others die of it
	}
	switch mode {
	case "serve": // logs, starts, stops on SIGTERM
		fmt.Fprintln(os.Stderr, "warming up")
		fmt.Println(`{"Fields":{"msg":"not yet"}}`)
		fmt.Println(startLine)
		<-term
		fmt.Println(`{"Fields":{"msg":"stopping"}}`)
		os.Exit(0)
	case "stubborn": // ignores SIGTERM
		fmt.Println(startLine)
		select {}
	case "early":
		fmt.Fprintln(os.Stderr, "boom: no config")
		os.Exit(3)
	case "silent": // never starts
		fmt.Fprintf(os.Stderr, "pid %d\n", os.Getpid())
		select {}
	case "protocol": // speaks lines on stdout, then exits
		for i := range 1000 {
			fmt.Printf(`{"seq":%d}`+"\n", i)
		}
		fmt.Fprintln(os.Stderr, "done")
	case "exit":
		fmt.Println(startLine)
		os.Exit(7)
	case "partial":
		fmt.Print("no newline")
	case "parent": // runs a "silent" child through Start, prints its pid, waits
		c := exec.Command(os.Args[0])
		c.Env = append(os.Environ(), childEnv+"=silent")
		p, err := Start(context.Background(), c, Config{})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Printf(`{"Fields":{"msg":"child started","grandchild":"%d"}}`+"\n", p.PID())
		select {}
	case "leader": // a group leader with a member it does not stop
		c := exec.Command(os.Args[0])
		c.Env = append(os.Environ(), childEnv+"=silent")
		if err := c.Start(); err != nil {
			os.Exit(1)
		}
		fmt.Printf(`{"Fields":{"msg":"child started","member":"%d"}}`+"\n", c.Process.Pid)
		<-term
		os.Exit(0)
	}
}

func command(mode string) *exec.Cmd {
	c := exec.Command(os.Args[0])
	c.Env = append(os.Environ(), childEnv+"="+mode)
	return c
}

func start(t *testing.T, mode string, cfg Config) *Proc {
	t.Helper()
	if cfg.StartMsg == "" && cfg.Stdout == nil {
		cfg.StartMsg = "child started"
	}
	p, err := Start(context.Background(), command(mode), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	return p
}

// gone waits (generously) until no process has pid.
func gone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("pid %d still runs", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestStartWaitsForStartLineAndStopsOnSIGTERM(t *testing.T) {
	p := start(t, "serve", Config{})
	if p.Field("listen") != "127.0.0.1:1" || p.Field("nope") != "" || p.PID() <= 0 {
		t.Fatalf("listen %q, pid %d", p.Field("listen"), p.PID())
	}
	if err := p.Stop(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	if p.ExitCode() != 0 || p.Wait() != nil {
		t.Errorf("exit %d, %v", p.ExitCode(), p.Wait())
	}
	out := string(p.Output())
	for _, want := range []string{"warming up\n", startLine + "\n", `"msg":"stopping"`} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if err := p.Stop(time.Second); err != nil {
		t.Errorf("stopping an exited process: %v", err)
	}
}

func TestStopKillsAfterGrace(t *testing.T) {
	p := start(t, "stubborn", Config{})
	if err := p.Stop(200 * time.Millisecond); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("stop: %v", err)
	}
	if p.ExitCode() != -1 {
		t.Errorf("exit code %d, want -1 (killed)", p.ExitCode())
	}
	gone(t, p.PID())
}

func TestExitBeforeStartLine(t *testing.T) {
	_, err := Start(context.Background(), command("early"), Config{StartMsg: "child started"})
	if err == nil || !strings.Contains(err.Error(), "boom: no config") || !strings.Contains(err.Error(), "exit status 3") {
		t.Fatalf("err %v", err)
	}
}

// TestNoStartLineLeavesNothing: a timeout or a cancelled context stops the
// process before Start returns.
func TestNoStartLineLeavesNothing(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for name, c := range map[string]struct {
		ctx  context.Context
		want error
	}{"timeout": {context.Background(), nil}, "cancelled": {cancelled, context.Canceled}} {
		var mu sync.Mutex
		pid := 0
		watch := func(line []byte) {
			if s, ok := strings.CutPrefix(string(line), "pid "); ok {
				mu.Lock()
				pid, _ = strconv.Atoi(s)
				mu.Unlock()
			}
		}
		_, err := Start(c.ctx, command("silent"), Config{StartMsg: "child started", StartTimeout: 500 * time.Millisecond, Watch: watch})
		if err == nil || c.want != nil && !errors.Is(err, c.want) {
			t.Fatalf("%s: %v", name, err)
		}
		mu.Lock()
		p := pid
		mu.Unlock()
		if p != 0 {
			gone(t, p)
		}
	}
}

func TestLogFileAndTail(t *testing.T) {
	log := filepath.Join(t.TempDir(), "child.log")
	p := start(t, "serve", Config{LogPath: log, TailLines: 2})
	p.Stop(30 * time.Second)
	b, err := os.ReadFile(log)
	want := `{"Fields":{"msg":"not yet"}}` + "\n" + startLine + "\n" + `{"Fields":{"msg":"stopping"}}` + "\n"
	// stderr's "warming up" is read by its own goroutine: it lands
	// anywhere among stdout's lines, which keep their order.
	if err != nil || strings.Count(string(b), "warming up\n") != 1 || strings.Replace(string(b), "warming up\n", "", 1) != want {
		t.Fatalf("log %q %v", b, err)
	}
	if string(p.Output()) != string(b) {
		t.Errorf("Output is not the log file")
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if tail := p.Tail(); tail != strings.Join(lines[len(lines)-2:], "\n") {
		t.Errorf("tail %q, want the log's last 2 lines", tail)
	}
}

// TestStdoutTaken: a protocol on stdout reaches the caller whole and in
// order before Exited, and stays out of the log.
func TestStdoutTaken(t *testing.T) {
	var lines []string
	p := start(t, "protocol", Config{Stdout: func(l []byte) { lines = append(lines, string(l)) }})
	<-p.Exited()
	if len(lines) != 1000 || lines[0] != `{"seq":0}` || lines[999] != `{"seq":999}` {
		t.Fatalf("%d lines, first %q", len(lines), lines[:min(len(lines), 1)])
	}
	if out := string(p.Output()); out != "done\n" {
		t.Errorf("output %q", out)
	}
}

func TestWatchAndPartialLine(t *testing.T) {
	var seen []string
	p, err := Start(context.Background(), command("partial"), Config{Watch: func(l []byte) { seen = append(seen, string(l)) }})
	if err != nil {
		t.Fatal(err)
	}
	<-p.Exited()
	if string(p.Output()) != "no newline\n" || len(seen) != 1 || seen[0] != "no newline" {
		t.Errorf("output %q, watched %q", p.Output(), seen)
	}
}

func TestExitCode(t *testing.T) {
	p := start(t, "exit", Config{})
	var ee *exec.ExitError
	if p.ExitCode() != 7 || !errors.As(p.Wait(), &ee) {
		t.Errorf("exit %d, %v", p.ExitCode(), p.Wait())
	}
}

// TestDiesWithParent: a child started here is killed when the process
// that started it dies without stopping it.
func TestDiesWithParent(t *testing.T) {
	p := start(t, "parent", Config{})
	child, err := strconv.Atoi(p.Field("grandchild"))
	if err != nil || syscall.Kill(child, 0) != nil {
		t.Fatalf("grandchild %q: %v", p.Field("grandchild"), err)
	}
	p.Kill()
	gone(t, child)
}

// TestGroupStop: Stop ends a group leader and the members it left.
func TestGroupStop(t *testing.T) {
	p := start(t, "leader", Config{Group: true})
	member, err := strconv.Atoi(p.Field("member"))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Stop(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	gone(t, member)
}

func TestRunningAndWaitGone(t *testing.T) {
	p := start(t, "serve", Config{})
	pid := p.PID()
	if !Running(pid) {
		t.Fatalf("pid %d runs but Running says no", pid)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := WaitGone(ctx, pid); err == nil {
		t.Fatal("WaitGone returned while the process runs")
	}
	// Killed but not yet reaped: a zombie, which has exited all the same.
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := WaitGone(ctx, pid); err != nil {
		t.Fatal(err)
	}
	if Running(pid) {
		t.Fatal("Running after WaitGone")
	}
	p.Wait()
}
