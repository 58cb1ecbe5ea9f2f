package ops_test

import (
	"encoding/json"
	"errors"
	gobuild "go/build"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/autopush-go/autopush/apitier"
	"github.com/autopush-go/autopush/apitier/pushapi/clients"
	"github.com/autopush-go/autopush/engine"
	et "github.com/autopush-go/autopush/engine/enginetest"
	"github.com/autopush-go/autopush/internal/dockerflow"
	"github.com/autopush-go/autopush/internal/promtext"
	"github.com/autopush-go/autopush/internal/settings"
	"github.com/autopush-go/autopush/sender/node"
	"github.com/autopush-go/autopush/stack/stacktest"
)

// The repository root, from this package's directory.
const root = ".."

func read(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, path))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// compose is the part of docker-compose.yml the checks read.
type compose struct {
	Services map[string]service `yaml:"services"`
	Volumes  map[string]any     `yaml:"volumes"`
}

type service struct {
	Image string `yaml:"image"`
	Build *struct {
		Context    string `yaml:"context"`
		Dockerfile string `yaml:"dockerfile"`
		Target     string `yaml:"target"`
	} `yaml:"build"`
	Command         []string          `yaml:"command"`
	Environment     map[string]string `yaml:"environment"`
	Ports           []string          `yaml:"ports"`
	Volumes         []string          `yaml:"volumes"`
	DependsOn       yaml.Node         `yaml:"depends_on"`
	Healthcheck     map[string]any    `yaml:"healthcheck"`
	Restart         string            `yaml:"restart"`
	StopGracePeriod string            `yaml:"stop_grace_period"`
	Ulimits         map[string]any    `yaml:"ulimits"`
}

// dependsOn returns the service's dependencies and their conditions (""
// for the short list form).
func (s service) dependsOn(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	switch s.DependsOn.Kind {
	case 0:
	case yaml.SequenceNode:
		var names []string
		if err := s.DependsOn.Decode(&names); err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			out[n] = ""
		}
	case yaml.MappingNode:
		var m map[string]struct{ Condition string }
		if err := s.DependsOn.Decode(&m); err != nil {
			t.Fatal(err)
		}
		for n, d := range m {
			out[n] = d.Condition
		}
	}
	return out
}

func loadCompose(t *testing.T) compose {
	t.Helper()
	var c compose
	if err := yaml.Unmarshal(read(t, "docker-compose.yml"), &c); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	return c
}

// interpolate resolves compose's ${VAR}, ${VAR:-default} and
// ${VAR:?message} against vars; required reports the :? variables.
var composeVar = regexp.MustCompile(`\$\{([A-Z_][A-Z0-9_]*)(?::([-?])([^}]*))?\}`)

func interpolate(v string, vars map[string]string, required map[string]bool) string {
	return composeVar.ReplaceAllStringFunc(v, func(ref string) string {
		m := composeVar.FindStringSubmatch(ref)
		val, ok := vars[m[1]]
		switch m[2] {
		case "?":
			required[m[1]] = true
		case "-":
			if !ok || val == "" {
				return m[3]
			}
		}
		return val
	})
}

// endpointConfig is autoendpoint's settings as its main
// (apitier/cmd/autoendpoint) composes them: the HTTP tier's, then the
// outbound sender's.
type endpointConfig struct {
	HTTP
	Sender
}

type (
	HTTP   = apitier.Config
	Sender = node.Config
)

func defaultEndpointConfig() endpointConfig {
	return endpointConfig{apitier.DefaultConfig(), node.DefaultConfig()}
}

// tierConfig loads a tier's settings from the service's environment, as
// the binary does, with the given variables set in the shell.
func tierConfig(t *testing.T, svc service, prefix string, cfg any, vars map[string]string, required map[string]bool) {
	t.Helper()
	known := map[string]bool{}
	for _, s := range settings.Describe(cfg, prefix) {
		known[s.Env] = true
	}
	env := map[string]string{}
	for k, v := range svc.Environment {
		if !known[k] {
			t.Errorf("compose sets %s, which is not a %s setting", k, prefix)
		}
		env[k] = interpolate(v, vars, required)
	}
	if _, err := settings.Load(cfg, prefix, nil, settings.MapEnv(env), io.Discard); err != nil {
		t.Fatalf("%s settings from compose: %v", prefix, err)
	}
}

func port(t *testing.T, hostport string) string {
	t.Helper()
	_, p, err := net.SplitHostPort(hostport)
	if err != nil {
		t.Fatalf("%q: %v", hostport, err)
	}
	return p
}

// published returns the container ports a service publishes, and fails
// on a port published on all interfaces.
func published(t *testing.T, name string, svc service) []string {
	t.Helper()
	var out []string
	for _, p := range svc.Ports {
		// Host ports may come from the environment (${WS_PORT:-8080}).
		parts := strings.Split(interpolate(p, nil, map[string]bool{}), ":")
		if len(parts) != 3 || parts[0] != "127.0.0.1" {
			t.Errorf("%s publishes %q: publish on 127.0.0.1 only (ip:host:container)", name, p)
			continue
		}
		out = append(out, parts[2])
	}
	return out
}

// TestComposeFile checks docker-compose.yml against the code: every
// variable set is a real setting, and both tiers get a configuration
// their Validate accepts and that wires them to each other and to the
// database the schema service prepares.
func TestComposeFile(t *testing.T) {
	c := loadCompose(t)
	var names []string
	for n := range c.Services {
		names = append(names, n)
	}
	slices.Sort(names)
	if strings.Join(names, " ") != "autoconnect autoendpoint grafana prometheus schema scylla" {
		t.Fatalf("services %v", names)
	}
	stages := dockerStages(t)
	for n, svc := range c.Services {
		switch {
		case svc.Build != nil:
			if svc.Build.Context != "." || svc.Build.Dockerfile != "docker/Dockerfile" || stages[svc.Build.Target] == nil {
				t.Errorf("%s builds %+v: not a target of docker/Dockerfile", n, *svc.Build)
			}
		case svc.Image != "":
			img, tag, ok := strings.Cut(svc.Image, ":")
			if !ok || tag == "" || tag == "latest" {
				t.Errorf("%s: image %q is not pinned to a version", n, svc.Image)
			}
			if n == "scylla" && img != "scylladb/scylla" {
				t.Errorf("scylla: image %q is not ScyllaDB's official image", svc.Image)
			}
		default:
			t.Errorf("%s has neither image nor build", n)
		}
		for _, v := range svc.Volumes {
			src, _, _ := strings.Cut(v, ":")
			if strings.HasPrefix(src, "./") {
				if _, err := os.Stat(filepath.Join(root, src)); err != nil {
					t.Errorf("%s mounts %s: %v", n, src, err)
				}
			} else if _, ok := c.Volumes[src]; !ok {
				t.Errorf("%s mounts volume %q, which is not declared", n, src)
			}
		}
	}
	if c.Services["scylla"].Healthcheck == nil {
		t.Error("scylla has no healthcheck: the schema service cannot wait for it")
	}

	vars := map[string]string{"CRYPTO_KEY": et.TestKey, "NODE_SECRET": "compose-test-secret"}
	required := map[string]bool{}
	ecfg, acfg := engine.DefaultConfig(), defaultEndpointConfig()
	tierConfig(t, c.Services["autoconnect"], "AUTOCONNECT", &ecfg, vars, required)
	tierConfig(t, c.Services["autoendpoint"], "AUTOEND", &acfg, vars, required)
	if err := ecfg.Validate(); err != nil {
		t.Errorf("autoconnect's compose settings: %v", err)
	}
	if err := errors.Join(acfg.HTTP.Validate(), acfg.Sender.Validate()); err != nil {
		t.Errorf("autoendpoint's compose settings: %v", err)
	}
	if !required["CRYPTO_KEY"] || !required["NODE_SECRET"] {
		t.Errorf("CRYPTO_KEY and NODE_SECRET must be required (${VAR:?...}), got %v", required)
	}

	// The tiers share their secrets and the endpoint URL.
	if ecfg.CryptoKey != et.TestKey || acfg.CryptoKey != et.TestKey {
		t.Error("the tiers do not both take CRYPTO_KEY")
	}
	if ecfg.NodeSecret == "" || ecfg.NodeSecret != acfg.NodeSecret {
		t.Error("the tiers do not share NODE_SECRET: the node API would refuse the endpoint node (not loopback)")
	}
	if ecfg.EndpointURL != acfg.EndpointURL {
		t.Errorf("endpoint URLs differ: autoconnect %q, autoendpoint %q", ecfg.EndpointURL, acfg.EndpointURL)
	}
	// The node URL stored in router records reaches the node API.
	if want := "http://autoconnect:" + port(t, ecfg.RouterListen); ecfg.NodeURL != want {
		t.Errorf("autoconnect node-url %q, want %q", ecfg.NodeURL, want)
	}
	// The push API's clients file is in a directory the service mounts
	// from the repository, and loads.
	if path := acfg.PushClientsFile; path != "" {
		host := ""
		for _, v := range c.Services["autoendpoint"].Volumes {
			src, dst, _ := strings.Cut(strings.TrimSuffix(v, ":ro"), ":")
			if rest, ok := strings.CutPrefix(path, dst+"/"); ok {
				host = filepath.Join(root, src, rest)
			}
		}
		if _, err := clients.Load(host, nil); host == "" || err != nil {
			t.Errorf("push-clients-file %s: not in a mounted directory of the repository, or it does not load (%s: %v)", path, host, err)
		}
	}
	// Published: the public listeners, never the node API.
	if p := published(t, "autoconnect", c.Services["autoconnect"]); !slices.Equal(p, []string{port(t, ecfg.Listen)}) {
		t.Errorf("autoconnect publishes %v, want only its websocket port %s", p, port(t, ecfg.Listen))
	}
	if p := published(t, "autoendpoint", c.Services["autoendpoint"]); !slices.Equal(p, []string{port(t, acfg.Listen)}) {
		t.Errorf("autoendpoint publishes %v, want only %s", p, port(t, acfg.Listen))
	}
	for _, n := range []string{"prometheus", "grafana"} {
		published(t, n, c.Services[n])
	}

	// Storage: both on the scylla service, in the keyspace the schema
	// service creates, after it finished.
	schema := c.Services["schema"]
	if schema.Build == nil || schema.Build.Target != "tools" || len(schema.Command) == 0 || schema.Command[0] != "cqlschema" {
		t.Fatalf("schema service does not run cqlschema from the tools image: %+v", schema.Command)
	}
	flags := map[string]string{}
	for i := 1; i+1 < len(schema.Command); i += 2 {
		flags[schema.Command[i]] = schema.Command[i+1]
	}
	if schema.Restart != "no" || schema.dependsOn(t)["scylla"] != "service_healthy" {
		t.Error("schema must be one-shot (restart: \"no\") and wait for scylla's healthcheck")
	}
	for _, tier := range []struct {
		name string
		s    []string
		ks   string
		db   string
	}{{"autoconnect", ecfg.CQLHosts, ecfg.CQLKeyspace, ecfg.Storage}, {"autoendpoint", acfg.CQLHosts, acfg.CQLKeyspace, acfg.Storage}} {
		if tier.db != "scylla" || !slices.Equal(tier.s, []string{flags["-hosts"]}) || tier.ks != flags["-keyspace"] {
			t.Errorf("%s uses storage %s on %v keyspace %s; the schema service prepared %s keyspace %s",
				tier.name, tier.db, tier.s, tier.ks, flags["-hosts"], flags["-keyspace"])
		}
		if host, _, _ := net.SplitHostPort(flags["-hosts"]); c.Services[host].Image == "" {
			t.Errorf("cql host %q is not a compose service", flags["-hosts"])
		}
		if c.Services[tier.name].dependsOn(t)["schema"] != "service_completed_successfully" {
			t.Errorf("%s does not wait for the schema service to complete", tier.name)
		}
	}

	// Stopping: the grace period covers a drain (autoconnect) and a
	// graceful shutdown (autoendpoint) before Docker sends SIGKILL.
	grace := func(n string) time.Duration {
		d, err := time.ParseDuration(c.Services[n].StopGracePeriod)
		if err != nil {
			t.Errorf("%s: stop_grace_period %q: %v", n, c.Services[n].StopGracePeriod, err)
		}
		return d
	}
	if g := grace("autoconnect"); g < ecfg.DrainWindow+20*time.Second {
		t.Errorf("autoconnect stop_grace_period %v is too short for drain-window %v", g, ecfg.DrainWindow)
	}
	if g := grace("autoendpoint"); g < acfg.ShutdownTimeout*3/2 {
		t.Errorf("autoendpoint stop_grace_period %v is shorter than its shutdown (%v)", g, acfg.ShutdownTimeout*3/2)
	}
	if c.Services["autoconnect"].Ulimits["nofile"] == nil {
		t.Error("autoconnect sets no nofile ulimit: its connection ceiling would be Docker's default")
	}

	// Grafana's home dashboard is one of the mounted dashboards.
	home := c.Services["grafana"].Environment["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
	if !slices.Contains(c.Services["grafana"].Volumes, "./ops/grafana/dashboards:"+filepath.Dir(home)+":ro") {
		t.Errorf("grafana home dashboard %s is not in the mounted ops/grafana/dashboards", home)
	}
	if _, err := os.Stat(filepath.Join(root, "ops/grafana/dashboards", filepath.Base(home))); err != nil {
		t.Error(err)
	}
}

// dockerStages maps each stage of docker/Dockerfile to its lines.
func dockerStages(t *testing.T) map[string][]string {
	t.Helper()
	stages := map[string][]string{}
	var cur string
	// Join continuation lines first.
	text := strings.ReplaceAll(string(read(t, "docker/Dockerfile")), "\\\n", " ")
	for line := range strings.SplitSeq(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		f := strings.Fields(line)
		if strings.EqualFold(f[0], "FROM") {
			if len(f) != 4 || !strings.EqualFold(f[2], "AS") {
				t.Fatalf("Dockerfile: stage without a name: %q", line)
			}
			cur = f[3]
			stages[cur] = []string{line}
			continue
		}
		if cur != "" {
			stages[cur] = append(stages[cur], line)
		}
	}
	return stages
}

// TestDockerfile checks docker/Dockerfile: multi-stage, static builds of
// binaries that exist, images running as uid 10001 with a version.json
// of the fields /__version__ serves.
func TestDockerfile(t *testing.T) {
	stages := dockerStages(t)
	build := strings.Join(stages["build"], "\n")
	if build == "" || !strings.Contains(build, "ENV CGO_ENABLED=0") {
		t.Fatal("no build stage with CGO_ENABLED=0")
	}
	// The Go image is at least go.mod's version.
	var goVersion string
	for line := range strings.SplitSeq(string(read(t, "go.mod")), "\n") {
		if v, ok := strings.CutPrefix(line, "go "); ok {
			goVersion = strings.TrimSpace(v)
		}
	}
	if !strings.Contains(string(read(t, "docker/Dockerfile")), "ARG GO_VERSION="+goVersion+"\n") {
		t.Errorf("Dockerfile's GO_VERSION is not go.mod's %s", goVersion)
	}
	// Every package built is a command.
	for _, pkg := range regexp.MustCompile(`\./[a-z/]+/cmd/[a-z]+`).FindAllString(build, -1) {
		p, err := gobuild.ImportDir(filepath.Join(root, pkg), 0)
		if err != nil || !p.IsCommand() {
			t.Errorf("Dockerfile builds %s, which is not a command: %v", pkg, err)
		}
	}
	// version.json carries the fields the nodes' fallback document has.
	var want map[string]any
	if err := json.Unmarshal(dockerflow.Version(""), &want); err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`printf '(\{[^']*\})\\n'`).FindStringSubmatch(build)
	if m == nil {
		t.Fatal("no version.json printf in the build stage")
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(strings.ReplaceAll(m[1], "%s", "x")), &got); err != nil {
		t.Fatalf("version.json template %s: %v", m[1], err)
	}
	for k := range want {
		if _, ok := got[k]; !ok {
			t.Errorf("version.json lacks %q", k)
		}
	}
	base := strings.Join(stages["base"], "\n")
	for _, want := range []string{"FROM scratch AS base", "USER 10001:10001", "/app/version.json", "WORKDIR /app"} {
		if !strings.Contains(base, want) {
			t.Errorf("base stage lacks %q", want)
		}
	}
	for target, bins := range map[string][]string{"autoconnect": {"autoconnect"}, "autoendpoint": {"autoendpoint"},
		"tools": {"autokey", "cqlschema", "endpointdiag", "pushsend", "pushclient"}} {
		st := strings.Join(stages[target], "\n")
		if !strings.HasPrefix(st, "FROM base AS "+target) {
			t.Errorf("target %s does not start from base", target)
		}
		if strings.Contains(st, "USER") {
			t.Errorf("target %s changes the user", target)
		}
		for _, b := range bins {
			if !strings.Contains(st, "/out/bin/"+b) || !strings.Contains(build, "/cmd/"+b) {
				t.Errorf("target %s does not get %s from the build", target, b)
			}
		}
	}
}

// prometheusConfig is the part of prometheus.yml the checks read.
type prometheusConfig struct {
	ScrapeConfigs []struct {
		JobName       string `yaml:"job_name"`
		MetricsPath   string `yaml:"metrics_path"`
		StaticConfigs []struct {
			Targets []string `yaml:"targets"`
		} `yaml:"static_configs"`
	} `yaml:"scrape_configs"`
}

// TestPrometheusConfig checks that Prometheus scrapes each tier where the
// compose file makes it serve /metrics: a connection node on its node API
// listener, an endpoint node on its metrics-listen (never its public one,
// which the compose file publishes).
func TestPrometheusConfig(t *testing.T) {
	var p prometheusConfig
	if err := yaml.Unmarshal(read(t, "ops/prometheus/prometheus.yml"), &p); err != nil {
		t.Fatalf("prometheus.yml: %v", err)
	}
	c := loadCompose(t)
	ecfg, acfg := engine.DefaultConfig(), defaultEndpointConfig()
	vars := map[string]string{"CRYPTO_KEY": et.TestKey, "NODE_SECRET": "x"}
	tierConfig(t, c.Services["autoconnect"], "AUTOCONNECT", &ecfg, vars, map[string]bool{})
	tierConfig(t, c.Services["autoendpoint"], "AUTOEND", &acfg, vars, map[string]bool{})
	want := map[string]string{
		"autoconnect":  "autoconnect:" + port(t, ecfg.RouterListen),
		"autoendpoint": "autoendpoint:" + port(t, acfg.MetricsListen),
	}
	if host, _, _ := strings.Cut(acfg.MetricsListen, ":"); host == "127.0.0.1" || host == "localhost" {
		t.Errorf("autoendpoint's metrics-listen %q is loopback: Prometheus, in another container, cannot reach it", acfg.MetricsListen)
	}
	if acfg.MetricsListen == acfg.Listen || port(t, acfg.MetricsListen) == port(t, acfg.Listen) {
		t.Errorf("autoendpoint serves /metrics on its public listener %s", acfg.Listen)
	}
	got := map[string]string{}
	for _, sc := range p.ScrapeConfigs {
		if sc.MetricsPath != "/metrics" || len(sc.StaticConfigs) != 1 || len(sc.StaticConfigs[0].Targets) != 1 {
			t.Errorf("job %s: %+v", sc.JobName, sc)
			continue
		}
		got[sc.JobName] = sc.StaticConfigs[0].Targets[0]
	}
	if len(got) != len(want) || got["autoconnect"] != want["autoconnect"] || got["autoendpoint"] != want["autoendpoint"] {
		t.Errorf("scrape targets %v, want %v", got, want)
	}
}

// dashboard is the part of the Grafana dashboard the checks read.
type dashboard struct {
	UID        string `json:"uid"`
	Templating struct {
		List []struct{ Name, Type, Query string }
	} `json:"templating"`
	Panels []struct {
		Type       string `json:"type"`
		Title      string `json:"title"`
		Datasource *struct {
			UID string `json:"uid"`
		} `json:"datasource"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

// TestDashboard checks the Grafana provisioning and dashboard: they parse,
// the dashboard picks its datasource with a variable (every panel uses
// it, none names a fixed uid) that offers the provisioned one, covers what an operator
// watches, and every metric, label value and grouping label its queries
// use is served by running nodes' /metrics (after a little traffic).
func TestDashboard(t *testing.T) {
	var ds struct {
		Datasources []struct{ UID, Type, URL string }
	}
	if err := yaml.Unmarshal(read(t, "ops/grafana/provisioning/datasources/prometheus.yml"), &ds); err != nil || len(ds.Datasources) != 1 {
		t.Fatalf("datasource provisioning: %v %+v", err, ds)
	}
	var prov struct {
		Providers []struct {
			Options struct{ Path string }
		}
	}
	if err := yaml.Unmarshal(read(t, "ops/grafana/provisioning/dashboards/dashboards.yml"), &prov); err != nil || len(prov.Providers) != 1 {
		t.Fatalf("dashboard provisioning: %v %+v", err, prov)
	}
	if !slices.Contains(loadCompose(t).Services["grafana"].Volumes, "./ops/grafana/dashboards:"+prov.Providers[0].Options.Path+":ro") {
		t.Errorf("the dashboards provider reads %s, where compose does not mount ops/grafana/dashboards", prov.Providers[0].Options.Path)
	}
	var d dashboard
	if err := json.Unmarshal(read(t, "ops/grafana/dashboards/autopush.json"), &d); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}
	// The variable offers every Prometheus datasource, the provisioned
	// one included: an imported dashboard works with the reader's.
	vars := d.Templating.List
	if len(vars) != 1 || vars[0].Name != "datasource" || vars[0].Type != "datasource" || vars[0].Query != "prometheus" ||
		ds.Datasources[0].Type != "prometheus" {
		t.Errorf("templating %+v: want one variable datasource of type datasource, query prometheus (provisioned: %+v)", vars, ds.Datasources[0])
	}
	type query struct{ panel, expr string }
	var queries []query
	plots := map[string][]string{} // lower-case panel title -> metrics its queries select
	for _, p := range d.Panels {
		title := strings.ToLower(p.Title)
		plots[title] = nil
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q does not use the datasource variable: %+v", p.Title, p.Datasource)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no queries", p.Title)
		}
		percentiles := false
		for _, q := range p.Targets {
			queries = append(queries, query{p.Title, q.Expr})
			percentiles = percentiles || strings.Contains(q.Expr, "histogram_quantile(")
			if refs, err := parsePromQL(q.Expr); err == nil {
				for _, sel := range refs.selectors {
					plots[title] = append(plots[title], sel.name)
				}
			}
		}
		if strings.Contains(title, "latency") && !percentiles {
			t.Errorf("latency panel %q shows no percentile (histogram_quantile)", p.Title)
		}
	}
	// What an operator watches: a panel whose title names the topic and,
	// where given, plots the metric that measures it.
	for topic, metric := range map[string]string{
		"connections": "", "hellos": "", "notifications by outcome": "", "errno": "",
		"delivery latency":               "autoendpoint_request_seconds_bucket",
		"ack latency":                    "autoconnect_delivery_ack_seconds_bucket",
		"storage latency (autoconnect)":  "autoconnect_storage_seconds_bucket",
		"storage latency (autoendpoint)": "autoendpoint_storage_seconds_bucket",
		"drain":                          "autoconnect_draining",
		"broadcasts":                     "autoconnect_broadcast_fanout_seconds_bucket",
		"sender: pushes received":        "autosender_pushes_received_total",
		"sender: failures":               "autosender_failed_total",
		"sender: provider send latency":  "autosender_send_seconds_bucket",
		"sender: post /push latency":     "autosender_receive_seconds_bucket",
		"sender: queue and sending pool": "autosender_pool_busy",
		"sender: claims":                 "autosender_claims_total",
	} {
		found := false
		for title, names := range plots {
			found = found || strings.Contains(title, topic) && (metric == "" || slices.Contains(names, metric))
		}
		if !found {
			t.Errorf("no panel about %q plotting %q", topic, metric)
		}
	}

	byJob := servedByJob(t)
	for _, q := range queries {
		refs, err := parsePromQL(q.expr)
		if err != nil {
			t.Errorf("panel %q: %v", q.panel, err)
			continue
		}
		if len(refs.selectors) == 0 {
			t.Errorf("panel %q: query %q names no metric", q.panel, q.expr)
		}
		labels := map[string]bool{"job": true, "instance": true}
		for _, sel := range refs.selectors {
			found := matching(t, byJob, sel)
			if len(found) == 0 {
				t.Errorf("panel %q: no running node serves %s%v (query %s)", q.panel, sel.name, sel.matchers, q.expr)
			}
			for _, s := range found {
				for l := range s.Labels {
					labels[l] = true
				}
			}
		}
		for _, l := range refs.grouping {
			if !labels[l] {
				t.Errorf("panel %q: groups by %q, a label none of its series has (query %s)", q.panel, l, q.expr)
			}
		}
		// Prometheus takes quantiles of le buckets only (the library's
		// vmrange buckets would give nothing), aggregated by le.
		if strings.Contains(q.expr, "histogram_quantile(") && (!labels["le"] || !slices.Contains(refs.grouping, "le")) {
			t.Errorf("panel %q: histogram_quantile needs le buckets, summed by le (query %s)", q.panel, q.expr)
		}
	}
}

// served is what servedByJob scraped, once for the package's tests.
var served struct {
	sync.Once
	byJob map[string][]promtext.Sample
}

// servedByJob returns the series of a stack (bridges on) after a little
// of every kind of traffic, by the job Prometheus scrapes them as (it
// adds job, the scrape config's name, and instance).
func servedByJob(t *testing.T) map[string][]promtext.Sample {
	served.Do(func() {
		st := stacktest.StartWith(t, stacktest.Options{Bridges: true})
		st.Exercise(t)
		engineText, apiText := st.Metrics(t)
		served.byJob = map[string][]promtext.Sample{
			"autoconnect":  stacktest.ParseMetrics(t, engineText),
			"autoendpoint": stacktest.ParseMetrics(t, apiText),
		}
	})
	if served.byJob == nil {
		t.Fatal("the stack's metrics could not be read (see the first test that asked)")
	}
	return served.byJob
}

// matching returns the served series sel selects.
func matching(t *testing.T, byJob map[string][]promtext.Sample, sel selector) []promtext.Sample {
	var out []promtext.Sample
	for job, series := range byJob {
	next:
		for _, s := range series {
			if s.Name != sel.name {
				continue
			}
			for _, m := range sel.matchers {
				v := s.Labels[m.label]
				if m.label == "job" {
					v = job
				}
				var ok bool
				switch m.op {
				case "=":
					ok = v == m.value
				case "!=":
					ok = v != m.value
				case "=~", "!~":
					re, err := regexp.Compile("^(?:" + m.value + ")$")
					if err != nil {
						t.Errorf("matcher %v: %v", m, err)
						return nil
					}
					ok = re.MatchString(v) == (m.op == "=~")
				}
				if !ok {
					continue next
				}
			}
			out = append(out, s)
		}
	}
	return out
}
