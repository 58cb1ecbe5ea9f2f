// Package cluster is the system under test of a load-test run: the
// processes the run starts and stops itself (autoconnect engines, an
// autoendpoint, or the single-node server autopush holding both; or, for
// the sender scenario, autoendpoint with its sender workers), their
// storage (a fresh keyspace, or an embedded store in a scratch
// directory), the binaries built for them, and the run's own Megaphone.
//
// Children run through internal/proc: they die with the load tester
// however it ends, and are stopped by their PIDs only. It must never stop
// a process it did not start, nor talk to a non-loopback address it was
// not given.
package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/autopush-go/autopush/internal/proc"
	"github.com/autopush-go/autopush/internal/token"
	"github.com/autopush-go/autopush/loadtest/probe"
	"github.com/autopush-go/autopush/loadtest/report"
	"github.com/autopush-go/autopush/loadtest/scenario"
	"github.com/autopush-go/autopush/storage/scylla"
	"github.com/autopush-go/autopush/tools/cql/localcluster"
)

// Cluster is the system under test: the engine processes and the endpoint
// this run started, sharing one storage. Its exported fields are set by
// Start (StartSender) and read-only after.
type Cluster struct {
	cfg      *scenario.Config
	log      io.Writer
	dir      string // the run's scratch directory (binaries, embedded data)
	binDir   string
	Storage  string // "scylla" or "embedded"
	keyspace string
	Engines  []*proc.Proc
	// GCTraces follow each engine's GODEBUG=gctrace=1 lines, for the live
	// heap (hold only; nil otherwise).
	GCTraces []*probe.GCTrace
	Endpoint *proc.Proc // autoendpoint (the first of Endpoints); nil for hold, or when autopush is both
	// Endpoints are the autoendpoint processes (Config.Endpoints; one
	// unless the run has a balancer in front of them).
	Endpoints []*proc.Proc
	// EndpointAddrs are their listen addresses, kept across restarts.
	EndpointAddrs []string
	// Balancer is nginx in front of the endpoints when there are several
	// (EndpointURL is then its address); nil otherwise.
	Balancer *proc.Proc
	// CQL is the run's own Cassandra cluster (Config.CQLNodes); nil when
	// the run uses CQLHosts or the embedded store.
	CQL      *localcluster.Cluster
	secret   string // the node secret of the run's tiers
	key      string // the run's crypto key
	logDir   string
	mu       sync.Mutex // Engines, Endpoints, Endpoint while a fault restarts one
	restarts int        // numbers the logs of restarted processes
	// single: one process (autopush) holds the engine and the endpoint (embedded
	// storage), so its memory includes the endpoint's.
	single bool
	// WSAddrs are the engines' websocket addresses, MetricsURLs their
	// /metrics (on the node API).
	WSAddrs     []string
	MetricsURLs []string
	EndpointURL string
	// APIMetricsURL is the API tier's /metrics, on its metrics-listen.
	APIMetricsURL string
	// Megaphone serves the broadcasts the engines poll (Config.Broadcasts
	// > 0); nil otherwise.
	Megaphone *Megaphone
	// pickAddr picks the address of a child whose URL is set before it
	// runs (startListening); nil: freePort. Tests pick one that is taken.
	pickAddr func() (string, error)
}

// ProfileTarget is a server process whose runtime profiles the run takes
// (-profile): its name and the base URL of its /debug/pprof/.
type ProfileTarget struct{ Name, BaseURL string }

// ProfileTargets lists the server processes: the engines (their node
// API), then the endpoint (its metrics-listen); the single-node server
// once.
func (c *Cluster) ProfileTargets() []ProfileTarget {
	var out []ProfileTarget
	for i, u := range c.MetricsURLs {
		name := fmt.Sprintf("autoconnect-%d", i)
		if c.single {
			name = "autopush"
		}
		out = append(out, ProfileTarget{name, strings.TrimSuffix(u, "/metrics")})
	}
	if c.Endpoint != nil {
		out = append(out, ProfileTarget{"autoendpoint", strings.TrimSuffix(c.APIMetricsURL, "/metrics")})
	}
	return out
}

// pprofEnv turns on the servers' pprof setting (prefix: AUTOCONNECT,
// AUTOEND or AUTOPUSH) when the run takes profiles.
func (c *Cluster) pprofEnv(prefix string) []string {
	if c.cfg.Profile == "" {
		return nil
	}
	return []string{prefix + "__PPROF=true"}
}

// Info describes the cluster for the report.
func (c *Cluster) Info() report.ClusterInfo {
	ci := report.ClusterInfo{Storage: c.Storage, Engines: len(c.Engines), EngineKind: "autoconnect", EngineAddrs: c.WSAddrs,
		Keyspace: c.keyspace}
	if c.Endpoint != nil || c.single {
		ci.Endpoint = c.EndpointURL
	}
	if c.single {
		ci.EngineKind = "autopush"
	}
	if c.Storage == "scylla" {
		ci.CQLHosts = c.cfg.CQLHosts
	}
	for _, e := range c.Engines {
		ci.EnginePIDs = append(ci.EnginePIDs, e.PID())
	}
	return ci
}

// Start builds (or finds) the binaries, makes the storage, and starts
// the engines and, when the scenario sends pushes, the endpoint; each
// child logs to logDir, the steps to log. When a step fails it stops what
// the earlier steps started (processes by their PIDs, the Megaphone, the
// keyspace, the scratch directory) and returns that step's error.
func Start(ctx context.Context, cfg *scenario.Config, logDir string, log io.Writer) (*Cluster, error) {
	c := newCluster(cfg, log)
	if err := c.start(ctx, logDir); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

// newCluster is a cluster not started yet: on Cassandra when cfg names
// hosts, else on the embedded store.
func newCluster(cfg *scenario.Config, log io.Writer) *Cluster {
	c := &Cluster{cfg: cfg, log: log, Storage: "embedded"}
	if len(cfg.CQLHosts) > 0 || cfg.CQLNodes > 0 {
		c.Storage = "scylla"
	}
	return c
}

// start is Start's steps; what each starts is kept in c, for stop.
func (c *Cluster) start(ctx context.Context, logDir string) error {
	cfg := c.cfg
	var err error
	if c.dir, err = os.MkdirTemp("", "loadtest-"); err != nil {
		return fmt.Errorf("loadtest: scratch dir: %w", err)
	}
	c.single = c.Storage == "embedded" && (cfg.Sends() || cfg.Single)
	var bins []string
	switch {
	case c.single:
		bins = []string{"autopush"}
	case cfg.Sends():
		bins = []string{"autoconnect", "autoendpoint"}
	default:
		bins = []string{"autoconnect"}
	}
	if c.binDir, err = Binaries(ctx, cfg.BinDir, c.dir, bins, c.log); err != nil {
		return err
	}
	key := token.GenerateKey()
	c.key, c.logDir = key, logDir
	c.secret = token.GenerateKey() // any random string does
	if cfg.CQLNodes > 0 {
		if err := c.startCQL(ctx); err != nil {
			return err
		}
	}
	if c.Storage == "scylla" {
		if err := c.makeKeyspace(ctx); err != nil {
			return err
		}
	}
	if cfg.Broadcasts > 0 {
		if c.Megaphone, err = startMegaphone(cfg.Broadcasts); err != nil {
			return err
		}
	}
	if c.single {
		return c.startSingle(ctx, key, logDir)
	}
	// The endpoint first: its address is settled only once it listens,
	// and the engines are told its URL.
	if cfg.Sends() {
		if err := c.startEndpoints(ctx); err != nil {
			return err
		}
	} else {
		// Nothing pushes: the engines' endpoint URL names no listener.
		port, err := freePort()
		if err != nil {
			return err
		}
		c.EndpointURL = "http://" + port
	}
	return c.startEngines(ctx, key, logDir)
}

// startEndpoints starts the autoendpoint processes, each on a port of its
// own (startListening); with several, nginx in front of them is the URL
// the engines hand out (startBalancer), picked first.
func (c *Cluster) startEndpoints(ctx context.Context) error {
	n := max(1, c.cfg.Endpoints)
	public := ""
	if n > 1 {
		addr, err := freePort()
		if err != nil {
			return err
		}
		public = "http://" + addr
	}
	for i := range n {
		name := "autoendpoint"
		if n > 1 {
			name = fmt.Sprintf("autoendpoint-%d", i)
		}
		p, addr, err := c.startListening(name, func(addr string) (*proc.Proc, error) {
			url := public
			if url == "" {
				url = "http://" + addr
			}
			return c.startEndpoint(ctx, name, addr, url)
		})
		if err != nil {
			return err
		}
		c.Endpoints, c.EndpointAddrs = append(c.Endpoints, p), append(c.EndpointAddrs, addr)
	}
	c.Endpoint = c.Endpoints[0]
	c.EndpointURL = "http://" + c.EndpointAddrs[0]
	c.APIMetricsURL = "http://" + c.Endpoint.Field("metrics") + "/metrics"
	if n > 1 {
		return c.startBalancer(ctx, strings.TrimPrefix(public, "http://"))
	}
	return nil
}

// startEndpoint starts autoendpoint name on addr, handing out url.
func (c *Cluster) startEndpoint(ctx context.Context, name, addr, url string) (*proc.Proc, error) {
	env := append(c.storageEnv("AUTOEND", "data"),
		"AUTOEND__LISTEN="+addr, "AUTOEND__ENDPOINT_URL="+url, "AUTOEND__CRYPTO_KEY="+c.key,
		"AUTOEND__NODE_SECRET="+c.secret)
	if c.cfg.Stalls > 0 {
		t := c.cfg.StallTimeout.String()
		env = append(env, "AUTOEND__REQUEST_TIMEOUT="+t, "AUTOEND__MAX_CONNECTIONS="+strconv.Itoa(c.cfg.Stalls+10000))
	}
	if c.cfg.Receipts {
		env = append(env, "AUTOEND__RECEIPTS=true", "AUTOEND__TRACKING_KEYS="+c.cfg.TrackingKey)
	}
	env = append(env, "AUTOEND__VERSION_FILE=", "AUTOEND__METRICS_LISTEN=127.0.0.1:0")
	env = append(env, c.pprofEnv("AUTOEND")...)
	env = append(env, passThrough("AUTOEND__", "AUTOENDPOINT__")...)
	return startChild(ctx, name, filepath.Join(c.binDir, "autoendpoint"), nil, env,
		c.logPath(name), "autoendpoint started", nil)
}

// logPath is a child's log file; a restarted child's gets a number, so
// the first one's log stays.
func (c *Cluster) logPath(name string) string {
	p := filepath.Join(c.logDir, name+".log")
	if _, err := os.Stat(p); err == nil {
		c.restarts++
		p = filepath.Join(c.logDir, fmt.Sprintf("%s.%d.log", name, c.restarts))
	}
	return p
}

// listenAttempts bounds startListening's starts.
const listenAttempts = 5

// startListening starts a child (start) that listens on an address this
// process picks, because the child's URL is configured before it runs (the
// endpoint's, which the engines hand out and VAPID's aud names): a free
// loopback port (c.pickAddr), released, then start(addr). Another process
// may take the port before the child listens (every bind and connect on
// the machine draws from the same ephemeral range; seen with CPU hogs and
// other tests running), so when the child reports exactly that, it starts
// again on another port.
func (c *Cluster) startListening(name string, start func(addr string) (*proc.Proc, error)) (*proc.Proc, string, error) {
	pick := c.pickAddr
	if pick == nil {
		pick = freePort
	}
	for attempt := 1; ; attempt++ {
		addr, err := pick()
		if err != nil {
			return nil, "", err
		}
		p, err := start(addr)
		if err == nil || attempt == listenAttempts || !addrTaken(err, addr) {
			return p, addr, err
		}
		fmt.Fprintf(c.log, "loadtest: %s: %s was taken before it listened; again on another port\n", name, addr)
	}
}

// addrTaken tells whether a child's start error (which holds the end of
// its output) is its listen on addr refused as in use: the binaries say
// "<setting> <addr>: address already in use ..." (listener.ListenError).
func addrTaken(err error, addr string) bool {
	return strings.Contains(err.Error(), " "+addr+": address already in use")
}

// storageEnv is the storage settings of a tier (prefix AUTOCONNECT or
// AUTOEND). On the embedded store, dir names its directory under the
// run's scratch directory: only one process may open it, so each engine
// of a hold run has its own (scenario.Config.Validate allows several
// only there).
func (c *Cluster) storageEnv(prefix, dir string) []string {
	if c.Storage == "embedded" {
		return []string{prefix + "__STORAGE=embedded", prefix + "__DATA_DIR=" + filepath.Join(c.dir, dir)}
	}
	return []string{prefix + "__STORAGE=scylla", prefix + "__CQL_HOSTS=" + strings.Join(c.cfg.CQLHosts, ","),
		prefix + "__CQL_KEYSPACE=" + c.keyspace, prefix + "__CQL_CONSISTENCY=" + c.cfg.CQLConsistency}
}

// passThrough returns this process's variables with any of the prefixes:
// the operator's AUTOCONNECT__*/AUTOEND__* settings win over the run's.
func passThrough(prefixes ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		for _, p := range prefixes {
			if strings.HasPrefix(kv, p) {
				out = append(out, kv)
			}
		}
	}
	return out
}

func (c *Cluster) makeKeyspace(ctx context.Context) error {
	b := make([]byte, 4)
	rand.Read(b)
	c.keyspace = "loadtest_" + hex.EncodeToString(b)
	sc := c.scyllaConfig()
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if err := scylla.ApplySchema(ctx, sc, c.cfg.CQLReplication); err != nil {
		// c.keyspace stays: the statements before the failed one may have
		// made it, and stop drops it if it exists.
		return fmt.Errorf("loadtest: schema on %s: %w", strings.Join(c.cfg.CQLHosts, ","), err)
	}
	fmt.Fprintf(c.log, "loadtest: keyspace %s on %s\n", c.keyspace, strings.Join(c.cfg.CQLHosts, ","))
	return nil
}

func (c *Cluster) scyllaConfig() scylla.Config {
	sc := scylla.DefaultConfig()
	sc.Hosts, sc.Keyspace, sc.Consistency = c.cfg.CQLHosts, c.keyspace, c.cfg.CQLConsistency
	sc.Timeout = 30 * time.Second
	return sc
}

// startEngines starts the autoconnect processes, a few at a time.
func (c *Cluster) startEngines(ctx context.Context, key, logDir string) error {
	n := c.cfg.EngineCount()
	c.Engines = make([]*proc.Proc, n)
	c.GCTraces = make([]*probe.GCTrace, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			env := c.engineEnv(i, "127.0.0.1:0", "127.0.0.1:0")
			var watch func([]byte)
			if c.cfg.Scenario == scenario.Hold {
				// hold reports the live heap, which only the runtime's
				// trace of each collection (a line on stderr) tells.
				env = append(env, "GODEBUG="+strings.Trim(os.Getenv("GODEBUG")+",gctrace=1", ","))
				c.GCTraces[i] = &probe.GCTrace{}
				watch = c.GCTraces[i].Line
			}
			c.Engines[i], errs[i] = startChild(ctx, fmt.Sprintf("autoconnect-%d", i), filepath.Join(c.binDir, "autoconnect"), nil, env,
				filepath.Join(logDir, fmt.Sprintf("autoconnect-%d.log", i)), "autoconnect started", watch)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for _, e := range c.Engines {
		c.WSAddrs = append(c.WSAddrs, e.Field("listen"))
		c.MetricsURLs = append(c.MetricsURLs, "http://"+e.Field("node_api")+"/metrics")
	}
	return nil
}

// engineEnv is engine i's settings, listening on the two addresses.
func (c *Cluster) engineEnv(i int, listen, router string) []string {
	env := append(c.storageEnv("AUTOCONNECT", fmt.Sprintf("data-%d", i)),
		"AUTOCONNECT__LISTEN="+listen, "AUTOCONNECT__ROUTER_LISTEN="+router,
		"AUTOCONNECT__CRYPTO_KEY="+c.key, "AUTOCONNECT__ENDPOINT_URL="+c.EndpointURL,
		"AUTOCONNECT__NODE_SECRET="+c.secret,
		"AUTOCONNECT__VERSION_FILE=", "AUTOCONNECT__DRAIN_WINDOW=2s")
	if c.cfg.EnginePingInterval > 0 {
		env = append(env, "AUTOCONNECT__PING_INTERVAL="+c.cfg.EnginePingInterval.String())
	}
	env = append(env, c.megaphoneEnv("AUTOCONNECT")...)
	env = append(env, c.pprofEnv("AUTOCONNECT")...)
	env = append(env, c.sourceCapEnv("AUTOCONNECT__MAX_CONNECTIONS_PER_SOURCE")...)
	env = append(env, c.packedProcsEnv()...)
	return append(env, passThrough("AUTOCONNECT__")...)
}

// packedProcsEnv holds several engines on this machine's cores to
// GOMAXPROCS = the cores, unless the environment sets it. An engine alone
// on a machine takes a Go processor per event loop beyond its cores
// (internal/procs); dozens of engines packed on two cores would each
// multiply their threads so (the machine's load average at 1,500,000
// idle user agents on 84 engines was 470, against 180 for a million on
// 56 before the change), which no deployment of one node per machine
// sees.
func (c *Cluster) packedProcsEnv() []string {
	if _, set := os.LookupEnv("GOMAXPROCS"); set || c.cfg.EngineCount() <= 1 {
		return nil
	}
	return []string{"GOMAXPROCS=" + strconv.Itoa(runtime.NumCPU())}
}

// EngineSourceCap is the engines' default max-connections-per-source. A
// run that puts more user agents on one source and one engine
// (scenario.Config.PerSource: few -source-ips) raises it to what it
// needs, as an operator raises it for a large NAT: each 127.0.0.x stands
// for many users.
const EngineSourceCap = 1024

// sourceCapEnv sets the engines' per-source cap (the variable name) when
// the run needs more than the default.
func (c *Cluster) sourceCapEnv(name string) []string {
	if n := c.cfg.PerSource(); n > EngineSourceCap {
		return []string{name + "=" + strconv.Itoa(n)}
	}
	return nil
}

// startSingle runs both tiers in one process over the embedded store, its
// push API on a port of its own (startListening).
func (c *Cluster) startSingle(ctx context.Context, key, logDir string) error {
	data := filepath.Join(c.dir, "dev")
	if err := os.MkdirAll(data, 0o700); err != nil {
		return err
	}
	env := []string{"AUTOPUSH__CRYPTO_KEY=" + key}
	env = append(env, c.megaphoneEnv("AUTOPUSH")...)
	env = append(env, c.pprofEnv("AUTOPUSH")...)
	env = append(env, c.sourceCapEnv("AUTOPUSH__CONNECT_MAX_CONNECTIONS_PER_SOURCE")...)
	if c.cfg.Stalls > 0 {
		t := c.cfg.StallTimeout.String()
		env = append(env, "AUTOPUSH__REQUEST_TIMEOUT="+t,
			"AUTOPUSH__ENDPOINT_MAX_CONNECTIONS="+strconv.Itoa(c.cfg.Stalls+10000))
	}
	var trace *probe.GCTrace
	var watch func([]byte)
	if c.cfg.Scenario == scenario.Hold {
		// hold reports the live heap from the runtime's trace (startEngines).
		env = append(env, "GODEBUG="+strings.Trim(os.Getenv("GODEBUG")+",gctrace=1", ","))
		trace = &probe.GCTrace{}
		watch = trace.Line
	}
	ch, addr, err := c.startListening("autopush", func(addr string) (*proc.Proc, error) {
		// The single-node server (stack/cmd/autopush), which applies the
		// engine's GC target as autoconnect does.
		args := []string{"-data-dir", filepath.Join(data, "store"), "-connect-listen", "127.0.0.1:0", "-router-listen", "127.0.0.1:0",
			"-endpoint-listen", addr, "-endpoint-url", "http://" + addr, "-metrics-listen", "127.0.0.1:0", "-log-level", "info"}
		if c.cfg.Receipts {
			// The service's flags all take a value, booleans too.
			args = append(args, "-receipts=true", "-tracking-keys", c.cfg.TrackingKey)
		}
		return startChild(ctx, "autopush", filepath.Join(c.binDir, "autopush"), args, env,
			filepath.Join(logDir, "autopush.log"), "autopush ready", watch)
	})
	if err != nil {
		return err
	}
	c.EndpointURL = "http://" + addr
	c.Engines, c.GCTraces = []*proc.Proc{ch}, []*probe.GCTrace{trace}
	c.WSAddrs = []string{strings.TrimSuffix(strings.TrimPrefix(ch.Field("websocket"), "ws://"), "/")}
	c.MetricsURLs = []string{"http://" + ch.Field("node_api") + "/metrics"}
	c.APIMetricsURL = "http://" + ch.Field("metrics") + "/metrics"
	return nil
}

// MilestonesURL is GET /__milestones__ of the (first) endpoint's
// metrics-listen: the milestone counts of every tracked push.
func (c *Cluster) MilestonesURL() string {
	return strings.TrimSuffix(c.APIMetricsURL, "/metrics") + "/__milestones__"
}

// megaphoneEnv points an engine process (its variables' prefix) at the
// run's Megaphone, when there is one.
func (c *Cluster) megaphoneEnv(prefix string) []string {
	if c.Megaphone == nil {
		return nil
	}
	return []string{prefix + "__MEGAPHONE_API_URL=" + c.Megaphone.url,
		prefix + "__MEGAPHONE_POLL_INTERVAL=" + c.cfg.BroadcastPoll.String()}
}

// Stop stops every process by its PID (engines drain on SIGTERM), drops
// the keyspace unless kept, and removes the scratch directory.
func (c *Cluster) Stop() {
	var wg sync.WaitGroup
	c.mu.Lock()
	procs := append(append(append([]*proc.Proc{}, c.Engines...), c.Endpoints...), c.Balancer)
	if len(c.Endpoints) == 0 {
		procs = append(procs, c.Endpoint) // the single-node server's is nil
	}
	c.mu.Unlock()
	for _, p := range procs {
		if p == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := p.Stop(30 * time.Second); err != nil {
				fmt.Fprintln(c.log, "loadtest:", err)
			}
		}()
	}
	wg.Wait()
	if c.Megaphone != nil {
		c.Megaphone.stop()
	}
	if c.CQL != nil {
		// The whole cluster goes, keyspace and all.
		if err := c.CQL.Close(); err != nil {
			fmt.Fprintln(c.log, "loadtest:", err)
		}
	} else if c.keyspace != "" && !c.cfg.KeepKeyspace {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if err := scylla.DropKeyspace(ctx, c.scyllaConfig()); err != nil {
			fmt.Fprintf(c.log, "loadtest: drop keyspace %s: %v\n", c.keyspace, err)
		}
		cancel()
	}
	if c.dir != "" {
		os.RemoveAll(c.dir)
	}
}

// startChild runs bin with env (added to this process's environment),
// its output in logPath (each line also to watch, when set), and waits
// until it logs the MozLog line whose Fields.msg is startMsg. It dies with
// the load tester however that ends, and is stopped by its PID only
// (internal/proc).
func startChild(ctx context.Context, name, bin string, args, env []string, logPath, startMsg string, watch func([]byte)) (*proc.Proc, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	p, err := proc.Start(ctx, cmd, proc.Config{Name: name, StartMsg: startMsg, StartTimeout: 2 * time.Minute, LogPath: logPath,
		Watch: watch})
	if err != nil {
		return nil, fmt.Errorf("loadtest: %w", err)
	}
	return p, nil
}

// Binaries returns a directory holding bins (autoconnect, autoendpoint,
// autopush): binDir when given, else a fresh build from this module into
// scratch.
func Binaries(ctx context.Context, binDir, scratch string, bins []string, log io.Writer) (string, error) {
	if binDir != "" {
		for _, b := range bins {
			if _, err := os.Stat(filepath.Join(binDir, b)); err != nil {
				return "", fmt.Errorf("loadtest: -bin-dir: %w", err)
			}
		}
		return binDir, nil
	}
	root, err := moduleRoot(ctx)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(scratch, "bin")
	pkgs := map[string]string{"autoconnect": "./engine/cmd/autoconnect", "autoendpoint": "./apitier/cmd/autoendpoint",
		"autopush": "./stack/cmd/autopush"}
	args := []string{"build", "-o", dir + "/"}
	for _, b := range bins {
		args = append(args, pkgs[b])
	}
	fmt.Fprintf(log, "loadtest: go %s\n", strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("loadtest: building the service: %v\n%s", err, out)
	}
	return dir, nil
}

// moduleRoot finds this module's directory from the working directory.
func moduleRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	gomod := strings.TrimSpace(string(out))
	if err != nil || gomod == "" || gomod == os.DevNull {
		return "", errors.New("loadtest: not inside the autopush module: run from the repository or pass -bin-dir")
	}
	b, err := os.ReadFile(gomod)
	if err != nil || !strings.Contains(string(b), "module github.com/autopush-go/autopush\n") {
		return "", fmt.Errorf("loadtest: %s is not the autopush module: pass -bin-dir", gomod)
	}
	return filepath.Dir(gomod), nil
}

// freePort asks the OS for a free loopback port, and releases it (for a
// child whose URL is set before it runs: startListening).
func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("loadtest: free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}
