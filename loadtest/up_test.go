package loadtest

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/autopush-go/autopush/internal/proc"
	"github.com/autopush-go/autopush/tools/cql/localcluster"
	"github.com/autopush-go/autopush/tools/e2e/e2etest"
)

// TestClusterUpDown: `make cluster` (tools/cluster.sh up) brings up the
// replicated cluster in the background and prints where it listens; every
// process it lists runs and answers its health check (the push API through
// nginx too); `make cluster-down` stops exactly those processes, the
// Cassandra nodes included, and removes their directories.
func TestClusterUpDown(t *testing.T) {
	localcluster.SkipUnlessGated(t, "")
	root := e2etest.ModuleRoot()
	dir := t.TempDir()
	script := func(arg string) string {
		cmd := exec.Command("bash", filepath.Join(root, "tools", "cluster.sh"), arg)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CLUSTER_DIR="+dir)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("cluster.sh %s: %v\n%s", arg, err, out)
		}
		return string(out)
	}
	out := script("up")
	down := false
	defer func() {
		if !down {
			script("down")
		}
	}()
	var st ClusterState
	b, err := os.ReadFile(filepath.Join(dir, "cluster.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	if len(st.CQLPIDs) != 3 || len(st.Engines) != 2 || len(st.Endpoints) != 2 || st.Balancer.PID == 0 {
		t.Fatalf("cluster.json: %s", b)
	}
	if !strings.Contains(out, st.Balancer.URL) || !strings.Contains(out, st.Engines[1].URL) {
		t.Errorf("make cluster printed:\n%s\nwithout the push API %s or engine %s", out, st.Balancer.URL, st.Engines[1].URL)
	}
	pids := append([]int{st.Supervisor, st.Balancer.PID}, st.CQLPIDs...)
	for _, l := range append(st.Engines, st.Endpoints...) {
		pids = append(pids, l.PID)
	}
	for _, pid := range pids {
		if !proc.Running(pid) {
			t.Errorf("pid %d listed in cluster.json does not run", pid)
		}
	}
	// Health: the push API through nginx, each endpoint, each engine's
	// metrics (Prometheus text).
	get := func(url string) {
		t.Helper()
		c := http.Client{Timeout: 10 * time.Second}
		resp, err := c.Get(url)
		if err != nil {
			t.Errorf("GET %s: %v", url, err)
			return
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %s", url, resp.Status)
		}
	}
	get(st.Balancer.URL + "/__heartbeat__")
	for _, e := range st.Endpoints {
		get(e.URL + "/__heartbeat__")
		get(e.MetricsURL)
	}
	for _, e := range st.Engines {
		get(e.MetricsURL)
	}

	script("down")
	down = true
	gone, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, pid := range pids {
		if err := proc.WaitGone(gone, pid); err != nil {
			t.Errorf("after make cluster-down: %v", err)
		}
	}
	for _, d := range st.CQLDirs {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("Cassandra directory %s left behind (%v)", d, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "cluster.json")); !os.IsNotExist(err) {
		t.Errorf("cluster.json left behind (%v)", err)
	}
}
