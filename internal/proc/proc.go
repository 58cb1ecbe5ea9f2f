package proc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Config says how Start runs a command. The zero value keeps the output in
// memory and returns as soon as the process runs.
type Config struct {
	// Name names the process in errors. Default: the command's base name.
	Name string
	// StartMsg, when set, makes Start wait for the stdout MozLog line
	// whose Fields.msg is StartMsg; Field reads that line's fields.
	StartMsg string
	// StartTimeout bounds that wait. Default 1 minute.
	StartTimeout time.Duration
	// LogPath, when set, is a file (created, truncated) that gets every
	// line instead of memory; Output then reads it back.
	LogPath string
	// TailLines is how many of the last lines Tail keeps. Default 40.
	TailLines int
	// Stdout, when set, takes the process's stdout: each line (without
	// its newline) goes to Stdout instead of the log, in order, on the
	// goroutine copying the stream; Exited is closed only after the last
	// one returned. For a child that speaks a protocol on stdout; StartMsg
	// is then not looked for.
	Stdout func(line []byte)
	// Watch, when set, is called with every line that is logged, as it
	// arrives: lines of one stream in order, the two streams from two
	// goroutines. For following what a child reports on stderr.
	Watch func(line []byte)
	// Group starts the process as the leader of a new process group, for
	// a command that spawns children of its own (a browser): Stop and
	// Kill then signal the whole group, whose id is the leader's PID.
	Group bool
}

// Proc is a running (or exited) child process. Its methods are safe for
// concurrent use.
type Proc struct {
	cmd     *exec.Cmd
	cfg     Config
	name    string
	exited  chan struct{}
	started chan map[string]any
	log     *os.File

	sawStart bool // the stdout goroutine's

	mu      sync.Mutex
	out     bytes.Buffer // every line, when there is no log file
	buf     []byte       // a line and its newline, for the log file
	tail    []string
	fields  map[string]any // the start line's Fields
	waitErr error
}

// Start runs cmd and, with cfg.StartMsg, waits for its start line. The
// streams cmd already has (cmd.Stdout or cmd.Stderr set, cmd.Stdin) are
// left to the caller; the others are logged. On an error no process is
// left running, and the error holds the end of its output.
func Start(ctx context.Context, cmd *exec.Cmd, cfg Config) (*Proc, error) {
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = time.Minute
	}
	if cfg.TailLines <= 0 {
		cfg.TailLines = 40
	}
	if cfg.Stdout != nil {
		cfg.StartMsg = ""
	}
	p := &Proc{cmd: cmd, cfg: cfg, name: cfg.Name, exited: make(chan struct{}), started: make(chan map[string]any, 1)}
	if p.name == "" {
		p.name = filepath.Base(cmd.Path)
	}
	if cfg.LogPath != "" {
		f, err := os.Create(cfg.LogPath)
		if err != nil {
			return nil, fmt.Errorf("proc: %s log: %w", p.name, err)
		}
		p.log = f
	}
	var streams []*lineWriter
	if cmd.Stdout == nil {
		w := &lineWriter{line: p.stdoutLine}
		if cfg.Stdout != nil {
			w.line = cfg.Stdout
		}
		cmd.Stdout, streams = w, append(streams, w)
	}
	if cmd.Stderr == nil {
		w := &lineWriter{line: p.logLine}
		cmd.Stderr, streams = w, append(streams, w)
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	dieWithParent(cmd.SysProcAttr)
	if cfg.Group {
		cmd.SysProcAttr.Setpgid = true
	}
	if err := cmd.Start(); err != nil {
		if p.log != nil {
			p.log.Close()
		}
		return nil, fmt.Errorf("proc: start %s: %w", p.name, err)
	}
	go func() {
		err := cmd.Wait() // returns once the streams are copied
		for _, w := range streams {
			w.flush()
		}
		p.mu.Lock()
		p.waitErr = err
		if p.log != nil {
			p.log.Close()
		}
		p.mu.Unlock()
		close(p.exited)
	}()
	if cfg.StartMsg == "" {
		return p, nil
	}
	return p, p.awaitStart(ctx)
}

// awaitStart waits for the start line; on failure it stops the process.
func (p *Proc) awaitStart(ctx context.Context) error {
	t := time.NewTimer(p.cfg.StartTimeout)
	defer t.Stop()
	var err error
	select {
	case f := <-p.started:
		p.setFields(f)
		return nil
	case <-p.exited:
		select {
		case f := <-p.started: // it started, then exited at once
			p.setFields(f)
			return nil
		default:
		}
		return fmt.Errorf("proc: %s exited before it started (%v):\n%s", p.name, p.Wait(), p.Tail())
	case <-t.C:
		err = fmt.Errorf("proc: %s did not start within %v:\n%s", p.name, p.cfg.StartTimeout, p.Tail())
	case <-ctx.Done():
		err = fmt.Errorf("proc: %s: %w", p.name, ctx.Err())
	}
	p.Stop(5 * time.Second)
	return err
}

func (p *Proc) setFields(f map[string]any) {
	p.mu.Lock()
	p.fields = f
	p.mu.Unlock()
}

// stdoutLine logs a stdout line and looks for the start line in it.
func (p *Proc) stdoutLine(line []byte) {
	p.logLine(line)
	if p.cfg.StartMsg == "" || p.sawStart || !bytes.Contains(line, []byte(p.cfg.StartMsg)) {
		return
	}
	var rec struct{ Fields map[string]any }
	if json.Unmarshal(line, &rec) == nil && rec.Fields["msg"] == p.cfg.StartMsg {
		p.sawStart = true
		p.started <- rec.Fields // buffered for the one start line
	}
}

// logLine keeps one line: in the log file or in memory, and in the tail.
func (p *Proc) logLine(line []byte) {
	if p.cfg.Watch != nil {
		p.cfg.Watch(line)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.log != nil {
		p.buf = append(append(p.buf[:0], line...), '\n')
		p.log.Write(p.buf)
	} else {
		p.out.Write(line)
		p.out.WriteByte('\n')
	}
	if len(p.tail) == p.cfg.TailLines {
		p.tail = p.tail[:copy(p.tail, p.tail[1:])]
	}
	p.tail = append(p.tail, string(line))
}

// PID is the process's id.
func (p *Proc) PID() int { return p.cmd.Process.Pid }

// Field is a string field of the start line ("" when absent).
func (p *Proc) Field(name string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	s, _ := p.fields[name].(string)
	return s
}

// Output is everything the process logged so far (both streams, line by
// line), read back from the log file when there is one.
func (p *Proc) Output() []byte {
	if p.cfg.LogPath != "" {
		b, _ := os.ReadFile(p.cfg.LogPath)
		return b
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return bytes.Clone(p.out.Bytes())
}

// Tail is the last lines logged, for error messages.
func (p *Proc) Tail() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.tail, "\n")
}

// Exited is closed once the process has exited and its output is in.
func (p *Proc) Exited() <-chan struct{} { return p.exited }

// Wait waits for the process to exit and returns how it ended: nil for
// exit status 0, else an *exec.ExitError ("exit status 1", "signal:
// killed").
func (p *Proc) Wait() error {
	<-p.exited
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.waitErr
}

// ExitCode waits for the process to exit and returns its exit status; -1
// when a signal ended it.
func (p *Proc) ExitCode() int {
	<-p.exited
	return p.cmd.ProcessState.ExitCode()
}

// Signal sends sig to the process's PID (never to its group). An exited
// process is not signalled.
func (p *Proc) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// Kill ends the process (with Group, its whole group) by SIGKILL at once
// and waits until it has exited.
func (p *Proc) Kill() {
	p.signal(syscall.SIGKILL)
	<-p.exited
	if p.cfg.Group {
		p.signal(syscall.SIGKILL) // members left behind by the leader
	}
}

// Stop sends SIGTERM (a node drains on it) and waits up to grace for the
// process to exit, then kills it. It returns nil when the process exited
// by itself (or had already), and an error saying it was killed otherwise.
func (p *Proc) Stop(grace time.Duration) error {
	select {
	case <-p.exited:
		return nil
	default:
	}
	p.signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.exited:
		if p.cfg.Group {
			p.signal(syscall.SIGKILL)
		}
		return nil
	case <-t.C:
		p.Kill()
		return fmt.Errorf("proc: %s (pid %d) did not stop within %v: killed", p.name, p.PID(), grace)
	}
}

// signal sends sig to the PID, or to the group the PID leads.
func (p *Proc) signal(sig syscall.Signal) {
	if !p.cfg.Group {
		p.cmd.Process.Signal(sig)
		return
	}
	// The group outlives its leader while members remain, so its id
	// cannot be reused until then.
	if err := syscall.Kill(-p.PID(), sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		p.cmd.Process.Signal(sig)
	}
}
