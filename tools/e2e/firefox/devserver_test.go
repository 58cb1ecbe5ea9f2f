//go:build linux

package firefox

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	et "github.com/autopush-go/autopush/engine/enginetest"
	"github.com/autopush-go/autopush/internal/proc"
	"github.com/autopush-go/autopush/internal/promtext"
	"github.com/autopush-go/autopush/tools/e2e/e2etest"
)

// devserver runs tools/cmd/devserver as a process over one data
// directory, restartable on the same ports: Firefox's profile names the
// websocket port and the endpoints name the HTTP one. Its methods are
// called from one goroutine at a time.
type devserver struct {
	bin, dataDir, logs string
	ws, node, http     string // the addresses Firefox and the endpoints know
	proc               *proc.Proc
	starts             int
}

// newDevserver builds the dev server; it is stopped when t ends.
func newDevserver(t *testing.T, binDir, logs string) *devserver {
	e2etest.Build(t, binDir, "./tools/cmd/devserver")
	d := &devserver{
		bin: filepath.Join(binDir, "devserver"), dataDir: filepath.Join(logs, "data"), logs: logs,
		ws: et.FreeAddr(t), node: et.FreeAddr(t), http: et.FreeAddr(t),
	}
	t.Cleanup(func() { d.stop(t) })
	return d
}

// start runs the dev server with its websocket listener on ws (d.ws, or
// another address to keep Firefox out while the API tier takes pushes).
func (d *devserver) start(t *testing.T, ws string) {
	t.Helper()
	d.starts++
	cmd := exec.Command(d.bin, "-data-dir", d.dataDir, "-ws", ws, "-node", d.node, "-http", d.http,
		"-endpoint-url", "http://"+d.http, "-log-level", "debug")
	p, err := proc.Start(context.Background(), cmd, proc.Config{StartMsg: "dev server ready"}) // gone with the test binary
	if err != nil {
		t.Fatalf("dev server %d: %v", d.starts, err)
	}
	d.proc = p
	t.Logf("dev server %d started (pid %d): ws %s, push API %s", d.starts, p.PID(), ws, d.http)
}

// stop ends the dev server by its PID (SIGTERM: it drains, storing what
// is unacked) and keeps its log.
func (d *devserver) stop(t *testing.T) {
	t.Helper()
	if d.proc == nil {
		return
	}
	clean := d.proc.Stop(30*time.Second) == nil
	log := filepath.Join(d.logs, fmt.Sprintf("devserver-%d.log", d.starts))
	os.WriteFile(log, d.proc.Output(), 0o600)
	t.Logf("dev server %d stopped (pid %d, clean exit %v), log %s", d.starts, d.proc.PID(), clean, log)
	d.proc = nil
}

// metrics reads the connection node's counters (GET /metrics on the node
// API).
func (d *devserver) metrics() (map[string]float64, error) {
	return promtext.Scrape(context.Background(), nil, "http://"+d.node+"/metrics")
}

// waitMetric polls the node's metrics until ok(value of name) or d passes,
// and returns the last value.
func (d *devserver) waitMetric(name string, dur time.Duration, ok func(float64) bool) (float64, bool) {
	deadline := time.Now().Add(dur)
	for {
		m, err := d.metrics()
		if err == nil && ok(m[name]) {
			return m[name], true
		}
		if time.Now().After(deadline) {
			return m[name], false
		}
		time.Sleep(100 * time.Millisecond)
	}
}
