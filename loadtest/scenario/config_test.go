package scenario

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
	"time"
)

func TestFlags(t *testing.T) {
	var help bytes.Buffer
	if _, err := ParseFlags(Hold, []string{"-h"}, &help); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: %v", err)
	}
	for _, want := range []string{"-uas", "-connect-rate", "-steps", "-settle", "-ping-interval", "-cql-hosts"} {
		if !strings.Contains(help.String(), want) {
			t.Errorf("hold help lacks %s", want)
		}
	}
	for _, notHold := range []string{"-rates", "-messages", "-session"} {
		if strings.Contains(help.String(), notHold+" ") {
			t.Errorf("hold help lists %s", notHold)
		}
	}
	cfg, err := ParseFlags(Notify, []string{"-uas", "3_000", "-rates", "100, 200,400", "-stage-time", "20s", "-cql-hosts", "", "-keep-keyspace"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.UAs != 3000 || len(cfg.Rates) != 3 || cfg.Rates[2] != 400 || cfg.StageTime != 20*time.Second || !cfg.KeepKeyspace {
		t.Errorf("parsed %+v", cfg)
	}
	for _, args := range [][]string{
		{"-uas", "0"}, {"-rates", "100,-1"}, {"-stage-time", "1s", "-warmup", "2s"}, {"-payload", "10"},
		{"-uas", "30000", "-cql-hosts", ""}, {"-engines", "2", "-cql-hosts", ""}, {"extra"}, {"-messages", "5"},
	} {
		if _, err := ParseFlags(Notify, args, io.Discard); err == nil {
			t.Errorf("ParseFlags(notify, %q) accepted", args)
		}
	}
	if cfg := Default(Hold); cfg.Validate() != nil && len(cfg.CQLHosts) == 0 {
		t.Errorf("hold defaults: %v", cfg.Validate())
	}
	// hold refuses what engine/cmd/membench (retired into it) refused.
	for _, args := range [][]string{{"-uas", "0"}, {"-samples", "0"}, {"-steps", "0"}, {"-hold", "-1s"}, {"-settle", "-1s"}, {"-budget", "-1"}, {"extra"}} {
		if _, err := ParseFlags(Hold, append(args, "-cql-hosts", ""), io.Discard); err == nil {
			t.Errorf("ParseFlags(hold, %q) accepted", args)
		}
	}
	if cfg, err := ParseFlags(Hold, []string{"-cql-hosts", ""}, io.Discard); err != nil || cfg.UAs != 10000 || cfg.Budget != 1024 || cfg.Steps != 4 || cfg.Samples != 3 {
		t.Errorf("hold defaults %+v %v", cfg, err)
	}
}

func TestSizing(t *testing.T) {
	cfg := Default(Hold)
	cfg.CQLHosts = []string{"127.0.0.1:9042"}
	cfg.UAs = 200000
	if cfg.EngineCount() != 12 || cfg.WorkerCount() != 12 {
		t.Errorf("200k: %d engines, %d workers; want 12, 12", cfg.EngineCount(), cfg.WorkerCount())
	}
	cfg.UAs, cfg.Workers = 5, 8
	if cfg.WorkerCount() != 5 {
		t.Errorf("more workers than user agents: %d", cfg.WorkerCount())
	}
}

// TestEmbeddedEngines: hold, which sends no pushes, runs as many engines
// as its user agents need on the embedded store (a store each); the
// scenarios that send keep the one process the embedded store allows.
func TestEmbeddedEngines(t *testing.T) {
	cfg := Default(Hold)
	cfg.CQLHosts, cfg.UAs = nil, 1000000
	if err := cfg.Validate(); err != nil || cfg.EngineCount() != 56 || cfg.WorkerCount() != 56 {
		t.Errorf("a million on the embedded store: %v, %d engines, %d workers; want 56 each", err, cfg.EngineCount(), cfg.WorkerCount())
	}
	cfg.UAs, cfg.Engines = 300, 3
	if err := cfg.Validate(); err != nil || cfg.EngineCount() != 3 {
		t.Errorf("-engines 3: %v, %d engines", err, cfg.EngineCount())
	}
	for _, s := range []string{Notify, Stored, Churn, Broadcast} {
		cfg := Default(s)
		cfg.CQLHosts, cfg.UAs = nil, 300
		if err := cfg.Validate(); err != nil || cfg.EngineCount() != 1 {
			t.Errorf("%s on the embedded store: %v, %d engines; want one", s, err, cfg.EngineCount())
		}
		cfg.Engines = 2
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), s+" sends pushes, so several engines need shared storage") {
			t.Errorf("%s with 2 engines on the embedded store: %v", s, err)
		}
		cfg.Engines, cfg.UAs = 0, 30000
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "exceed one engine's") {
			t.Errorf("%s with 30,000 user agents on the embedded store: %v", s, err)
		}
	}
}

func TestSenderFlags(t *testing.T) {
	t.Setenv("CQL_HOSTS", "127.0.0.1:9042")
	var help bytes.Buffer
	if _, err := ParseFlags(Sender, []string{"-h"}, &help); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: %v", err)
	}
	for _, want := range []string{"-push-rate", "-duration", "-provider-rate", "-provider-delay", "-provider-latency", "-average-latency", "-measure", "-warmup", "-rate-tolerance"} {
		if !strings.Contains(help.String(), want) {
			t.Errorf("sender help lacks %s", want)
		}
	}
	for _, notSender := range []string{"-uas", "-rates", "-payload", "-session"} {
		if strings.Contains(help.String(), notSender+" ") {
			t.Errorf("sender help lists %s", notSender)
		}
	}
	// The embedded store unless -cql-hosts says otherwise, whatever
	// CQL_HOSTS; the Java sender's settings and Swrve's measured latency by
	// default.
	cfg, err := ParseFlags(Sender, nil, io.Discard)
	if err != nil || len(cfg.CQLHosts) != 0 || cfg.ProviderRate != 300 || cfg.ProviderDelay != 4*time.Millisecond || cfg.PushRate != 500 || cfg.ProviderLatency != MeasuredSwrve ||
		cfg.Measure != time.Minute || cfg.RateTolerance != 0.01 {
		t.Errorf("sender defaults %+v %v", cfg, err)
	}
	if cfg, err := ParseFlags(Sender, []string{"-cql-hosts", "127.0.0.1:9042", "-provider-latency", "20ms"}, io.Discard); err != nil ||
		len(cfg.CQLHosts) != 1 {
		t.Errorf("sender on CQL: %+v %v", cfg, err)
	}
	for _, args := range [][]string{
		{"-push-rate", "250"},                     // not above the pace: the queue would not fill
		{"-push-rate", "260", "-duration", "70s"}, // 18,200 pushes run out before 10 s + 1 min at 250/s (and 5% more)
		{"-duration", "30s"}, {"-provider-latency", "often"}, {"-rate-tolerance", "0"}, {"-measure", "0s"}, {"-provider-rate", "-1"},
		{"-provider-delay", "3ms"}, // 333/s: over 95% of the limit of 300
		{"-provider-delay", "0s"},
	} {
		if _, err := ParseFlags(Sender, args, io.Discard); err == nil {
			t.Errorf("ParseFlags(sender, %q) accepted", args)
		}
	}
}

// The flags that said "sender" for the application server are read under
// their former names too, so older command lines still run.
func TestFormerFlagNames(t *testing.T) {
	for _, args := range [][]string{
		{"-sender-conns", "3", "-fresh-sender-keys"},
		{"-appserver-conns", "3", "-fresh-appserver-keys"},
	} {
		cfg, err := ParseFlags(Notify, args, io.Discard)
		if err != nil || cfg.AppServerConns != 3 || !cfg.FreshAppServerKeys {
			t.Errorf("ParseFlags(notify, %q): conns %d, fresh keys %v, %v; want 3, true", args, cfg.AppServerConns, cfg.FreshAppServerKeys, err)
		}
	}
}
