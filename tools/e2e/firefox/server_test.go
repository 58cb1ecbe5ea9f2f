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
	"github.com/autopush-go/autopush/stack/single"
	"github.com/autopush-go/autopush/tools/e2e/e2etest"
)

// server runs the single-node server (stack/cmd/autopush) as a
// process over one data directory, with its key kept there (as make run
// does), restartable on the same ports: Firefox's profile names the
// websocket port and the endpoints name the HTTP one. Its methods are
// called from one goroutine at a time.
type server struct {
	bin, dataDir, logs string
	ws, node, http     string // the addresses Firefox and the endpoints know
	endpointURL        string // "http://" + http, unless a proxy is in front
	proc               *proc.Proc
	starts             int
}

// newServer builds the server; it is stopped when t ends.
func newServer(t *testing.T, binDir, logs string) *server {
	e2etest.Build(t, binDir, "./stack/cmd/autopush")
	d := &server{
		bin: filepath.Join(binDir, "autopush"), dataDir: filepath.Join(logs, "data"), logs: logs,
		ws: et.FreeAddr(t), node: et.FreeAddr(t), http: et.FreeAddr(t),
	}
	d.endpointURL = "http://" + d.http
	t.Cleanup(func() { d.stop(t) })
	return d
}

// start runs the server with its websocket listener on ws (d.ws, or
// another address to keep Firefox out while the API tier takes pushes).
func (d *server) start(t *testing.T, ws string) {
	t.Helper()
	d.starts++
	cmd := exec.Command(d.bin, "-data-dir", filepath.Join(d.dataDir, "store"), "-crypto-key-file", filepath.Join(d.dataDir, "crypto_key"),
		"-connect-listen", ws, "-router-listen", d.node, "-endpoint-listen", d.http, "-metrics-listen", "127.0.0.1:0",
		"-endpoint-url", d.endpointURL, "-drain-window", "1s", "-log-level", "debug")
	p, err := proc.Start(context.Background(), cmd, proc.Config{StartMsg: single.ReadyMsg}) // gone with the test binary
	if err != nil {
		t.Fatalf("server %d: %v", d.starts, err)
	}
	d.proc = p
	t.Logf("server %d started (pid %d): ws %s, push API %s", d.starts, p.PID(), ws, d.http)
}

// stop ends the server by its PID (SIGTERM: it drains, storing what
// is unacked) and keeps its log.
func (d *server) stop(t *testing.T) {
	t.Helper()
	if d.proc == nil {
		return
	}
	clean := d.proc.Stop(30*time.Second) == nil
	log := filepath.Join(d.logs, fmt.Sprintf("autopush-%d.log", d.starts))
	os.WriteFile(log, d.proc.Output(), 0o600)
	t.Logf("server %d stopped (pid %d, clean exit %v), log %s", d.starts, d.proc.PID(), clean, log)
	d.proc = nil
}

// metrics reads the connection node's counters (GET /metrics on the node
// API).
func (d *server) metrics() (map[string]float64, error) {
	return promtext.Scrape(context.Background(), nil, "http://"+d.node+"/metrics")
}

// waitMetric polls the node's metrics until ok(value of name) or d passes,
// and returns the last value.
func (d *server) waitMetric(name string, dur time.Duration, ok func(float64) bool) (float64, bool) {
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
