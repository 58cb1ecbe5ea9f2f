package loadtest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// child is a service process this run started (autoconnect, autoendpoint
// or devserver). Its stdout and stderr go to a log file; it is stopped by
// its PID only, and dies with the load tester (Pdeathsig) however that
// ends.
type child struct {
	name   string
	cmd    *exec.Cmd
	done   chan struct{}
	logf   *os.File
	mu     sync.Mutex
	tail   []string
	fields map[string]any // the start line's fields
}

// startChild runs bin with env (added to this process's environment) and
// waits until it logs a MozLog line whose Fields.msg is startMsg.
func startChild(ctx context.Context, name, bin string, args, env []string, logPath, startMsg string) (*child, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("loadtest: %s log: %w", name, err)
	}
	c := &child{name: name, cmd: exec.Command(bin, args...), done: make(chan struct{}), logf: logf}
	c.cmd.Env = append(os.Environ(), env...)
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, err := c.cmd.StdoutPipe()
	if err != nil {
		logf.Close()
		return nil, err
	}
	stderr, err := c.cmd.StderrPipe()
	if err != nil {
		logf.Close()
		return nil, err
	}
	if err := c.cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("loadtest: start %s: %w", bin, err)
	}
	started := make(chan map[string]any, 1)
	var readers sync.WaitGroup
	readers.Add(2)
	go func() { defer readers.Done(); c.follow(stdout, startMsg, started) }()
	go func() { defer readers.Done(); c.follow(stderr, "", nil) }()
	go func() {
		readers.Wait() // Wait only after the pipes are drained
		c.cmd.Wait()
		logf.Close()
		close(c.done)
	}()
	t := time.NewTimer(2 * time.Minute)
	defer t.Stop()
	select {
	case c.fields = <-started:
		return c, nil
	case <-c.done:
		return nil, fmt.Errorf("loadtest: %s exited before starting (%v):\n%s", name, c.cmd.ProcessState, c.tailText())
	case <-t.C:
		err = fmt.Errorf("loadtest: %s did not start within 2 minutes:\n%s", name, c.tailText())
	case <-ctx.Done():
		err = ctx.Err()
	}
	c.stop(5 * time.Second)
	return nil, err
}

// follow copies r to the log, keeps its last lines, and reports the start
// line on started.
func (c *child) follow(r io.Reader, startMsg string, started chan<- map[string]any) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		c.mu.Lock()
		c.logf.Write(append(line, '\n'))
		c.tail = append(c.tail, string(line))
		if len(c.tail) > 40 {
			c.tail = c.tail[1:]
		}
		c.mu.Unlock()
		if started != nil {
			var rec struct{ Fields map[string]any }
			if json.Unmarshal(line, &rec) == nil && rec.Fields["msg"] == startMsg {
				started <- rec.Fields
				started = nil
			}
		}
	}
}

func (c *child) tailText() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.Join(c.tail, "\n")
}

func (c *child) pid() int { return c.cmd.Process.Pid }

// field is a string field of the start line.
func (c *child) field(name string) string { s, _ := c.fields[name].(string); return s }

// exited reports whether the process is gone.
func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM to the child's PID (a node drains) and SIGKILL if it
// has not exited within grace.
func (c *child) stop(grace time.Duration) error {
	if c.exited() {
		return nil
	}
	c.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-c.done:
		return nil
	case <-t.C:
		c.cmd.Process.Kill()
		<-c.done
		return errors.New("loadtest: " + c.name + " did not stop in time: killed")
	}
}
