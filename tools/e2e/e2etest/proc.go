package e2etest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Proc is one of the service's commands running as its own process, its
// output (MozLog JSON lines on stdout, anything on stderr) kept in memory.
// Its methods are safe for concurrent use.
type Proc struct {
	cmd      *exec.Cmd
	startMsg string
	started  chan map[string]any
	exited   chan struct{}

	mu      sync.Mutex
	out     bytes.Buffer
	partial []byte
	fields  map[string]any // the start line's Fields
}

// Start runs cmd and waits until it logs the MozLog line whose
// Fields.msg is startMsg. The process is killed when the test ends, and
// its output is logged if the test failed.
func Start(t testing.TB, cmd *exec.Cmd, startMsg string) *Proc {
	t.Helper()
	p, err := StartProc(cmd, startMsg, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("---- %s (pid %d) ----\n%s", filepath.Base(cmd.Path), p.PID(), p.Output())
		}
	})
	return p
}

// StartProc is Start for a caller that manages the process's life
// itself. On an error no process is left running; its output is in the
// error.
func StartProc(cmd *exec.Cmd, startMsg string, timeout time.Duration) (*Proc, error) {
	p := &Proc{cmd: cmd, startMsg: startMsg, started: make(chan map[string]any, 1), exited: make(chan struct{})}
	// Writers rather than a pipe: Wait then returns only once the last
	// line is in.
	cmd.Stdout, cmd.Stderr = (*lineWriter)(p), (*rawWriter)(p)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() { cmd.Wait(); close(p.exited) }()
	name := filepath.Base(cmd.Path)
	select {
	case p.fields = <-p.started:
		return p, nil
	case <-p.exited:
		return nil, fmt.Errorf("%s exited before it started:\n%s", name, p.Output())
	case <-time.After(timeout):
		p.Kill()
		return nil, fmt.Errorf("%s did not start within %v:\n%s", name, timeout, p.Output())
	}
}

// PID is the process's id.
func (p *Proc) PID() int { return p.cmd.Process.Pid }

// Field is a string field of the start line.
func (p *Proc) Field(name string) string { s, _ := p.fields[name].(string); return s }

// Output is everything the process printed so far.
func (p *Proc) Output() []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return bytes.Clone(p.out.Bytes())
}

// Exited is closed once the process has exited.
func (p *Proc) Exited() <-chan struct{} { return p.exited }

// Signal sends sig to the process's PID.
func (p *Proc) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// ExitCode is the exit status once Exited is closed; -1 when a signal
// killed the process.
func (p *Proc) ExitCode() int {
	<-p.exited
	return p.cmd.ProcessState.ExitCode()
}

// Kill stops the process by its PID at once and waits for it.
func (p *Proc) Kill() {
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

// Stop sends SIGTERM to the PID and waits up to grace for the process to
// exit, then kills it. It reports whether the process exited on its own.
func (p *Proc) Stop(grace time.Duration) bool {
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		return true
	case <-time.After(grace):
		p.Kill()
		return false
	}
}

type lineWriter Proc

// Write keeps stdout and watches it, line by line, for the start line.
func (w *lineWriter) Write(b []byte) (int, error) {
	p := (*Proc)(w)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.out.Write(b)
	p.partial = append(p.partial, b...)
	for {
		i := bytes.IndexByte(p.partial, '\n')
		if i < 0 {
			break
		}
		var rec struct{ Fields map[string]any }
		if json.Unmarshal(p.partial[:i], &rec) == nil && rec.Fields["msg"] == p.startMsg {
			select {
			case p.started <- rec.Fields:
			default:
			}
		}
		p.partial = p.partial[:copy(p.partial, p.partial[i+1:])]
	}
	return len(b), nil
}

type rawWriter Proc

func (w *rawWriter) Write(b []byte) (int, error) {
	p := (*Proc)(w)
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.Write(b)
}
