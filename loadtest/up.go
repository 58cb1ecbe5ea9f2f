package loadtest

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/autopush-go/autopush/loadtest/cluster"
	"github.com/autopush-go/autopush/loadtest/scenario"
)

// ClusterState is what `loadtest cluster` writes to DIR/cluster.json once
// everything answers: the processes it started (make cluster-down stops
// them by these PIDs if the supervisor itself is gone) and where they
// listen.
type ClusterState struct {
	Supervisor int      `json:"supervisor_pid"`
	CQLHosts   []string `json:"cql_hosts"`
	CQLPIDs    []int    `json:"cql_pids"`
	CQLDirs    []string `json:"cql_dirs"`
	Keyspace   string   `json:"keyspace"`
	Engines    []Listen `json:"engines"`
	Endpoints  []Listen `json:"endpoints"`
	Balancer   Listen   `json:"balancer"`
	// ProviderLogs is where the endpoints' outbound sender records what
	// it would send to Swrve (log-provider-file).
	ProviderLogs []string `json:"provider_logs"`
}

// Listen is one process and its addresses.
type Listen struct {
	PID        int    `json:"pid"`
	URL        string `json:"url"`
	MetricsURL string `json:"metrics_url,omitempty"`
}

// Cluster runs `loadtest cluster`: the replicated cluster of the faults
// scenario (its own Cassandra nodes, engines, endpoints behind nginx),
// started and kept until SIGTERM or SIGINT, when it stops everything by
// PID. make cluster runs it in the background; make cluster-down signals
// it.
func Cluster(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg := scenario.Default(scenario.Faults)
	fs := flag.NewFlagSet("loadtest cluster", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", "loadtest/out/cluster", "directory for cluster.json, cluster.txt and the processes' logs")
	fs.IntVar(&cfg.CQLNodes, "cql-nodes", cfg.CQLNodes, "Cassandra nodes (127.0.0.1..n), keyspace replicated on each")
	fs.IntVar(&cfg.Engines, "engines", cfg.Engines, "autoconnect processes")
	fs.IntVar(&cfg.Endpoints, "endpoints", cfg.Endpoints, "autoendpoint processes (behind nginx when above 1)")
	fs.StringVar(&cfg.BinDir, "bin-dir", "", "directory with autoconnect and autoendpoint (empty: go build them)")
	fs.StringVar(&cfg.CQLConsistency, "cql-consistency", cfg.CQLConsistency, "the tiers' CQL consistency")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if cfg.CQLNodes < 1 || cfg.Engines < 1 || cfg.Endpoints < 1 {
		return fmt.Errorf("loadtest cluster: -cql-nodes, -engines and -endpoints must be at least 1")
	}
	logDir := filepath.Join(*dir, "logs")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return err
	}
	abs, err := filepath.Abs(*dir)
	if err != nil {
		return err
	}
	// The outbound sender records what it would send to Swrve (no
	// provider is reachable from here): every endpoint node appends to
	// one file.
	os.Setenv("AUTOEND__LOG_PROVIDER_FILE", filepath.Join(abs, "pushes.log"))
	c, err := cluster.Start(ctx, &cfg, logDir, stderr)
	if err != nil {
		return err
	}
	defer c.Stop()
	st := ClusterState{Supervisor: os.Getpid(), CQLHosts: c.CQL.Hosts, Keyspace: c.Info().Keyspace,
		Balancer: Listen{URL: c.EndpointURL}, ProviderLogs: []string{filepath.Join(abs, "pushes.log")}}
	if c.Balancer != nil {
		st.Balancer.PID = c.Balancer.PID()
	}
	for i := range c.CQL.Nodes() {
		st.CQLPIDs, st.CQLDirs = append(st.CQLPIDs, c.CQL.PID(i)), append(st.CQLDirs, c.CQL.Dir(i))
	}
	for i, e := range c.Engines {
		st.Engines = append(st.Engines, Listen{PID: e.PID(), URL: "ws://" + c.WSAddrs[i], MetricsURL: c.MetricsURLs[i]})
	}
	for i, e := range c.Endpoints {
		st.Endpoints = append(st.Endpoints, Listen{PID: e.PID(), URL: "http://" + c.EndpointAddrs[i],
			MetricsURL: "http://" + e.Field("metrics") + "/metrics"})
	}
	b, _ := json.MarshalIndent(st, "", "  ")
	if err := os.WriteFile(filepath.Join(*dir, "cluster.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	txt := st.Describe(abs)
	if err := os.WriteFile(filepath.Join(*dir, "cluster.txt"), []byte(txt), 0o644); err != nil {
		return err
	}
	fmt.Fprint(stdout, txt)
	<-ctx.Done()
	fmt.Fprintln(stderr, "loadtest cluster: stopping (engines drain first)")
	return nil
}

// Describe is where everything listens, for people.
func (st ClusterState) Describe(dir string) string {
	b := &strings.Builder{}
	fmt.Fprintf(b, "autopush cluster up (supervisor pid %d; make cluster-down stops it)\n", st.Supervisor)
	fmt.Fprintf(b, "  push API (nginx, pid %d):  %s   (endpoints hand out URLs under it)\n", st.Balancer.PID, st.Balancer.URL)
	for i, e := range st.Endpoints {
		fmt.Fprintf(b, "  autoendpoint-%d (pid %d):   %s   metrics %s\n", i, e.PID, e.URL, e.MetricsURL)
	}
	for i, e := range st.Engines {
		fmt.Fprintf(b, "  autoconnect-%d (pid %d):    %s   metrics %s\n", i, e.PID, e.URL, e.MetricsURL)
	}
	for i, h := range st.CQLHosts {
		fmt.Fprintf(b, "  cassandra node %d (pid %d): %s   keyspace %s, replicated on all %d\n", i+1, st.CQLPIDs[i], h, st.Keyspace, len(st.CQLHosts))
	}
	fmt.Fprintf(b, "  outbound sender log:       %s\n", strings.Join(st.ProviderLogs, " "))
	fmt.Fprintf(b, "  logs:                      %s/logs\n", dir)
	return b.String()
}
