package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/autopush-go/autopush/storage/scylla"
	"github.com/autopush-go/autopush/storage/scylla/cqltest"
)

func TestHelpAndBadFlags(t *testing.T) {
	var out, errs bytes.Buffer
	if err := run(context.Background(), []string{"-help"}, &out, &errs); err == nil || !strings.Contains(errs.String(), "-replication") {
		t.Fatalf("help: %v %q", err, errs.String())
	}
	if err := run(context.Background(), []string{"-keyspace", "no spaces allowed"}, &out, &errs); err == nil {
		t.Fatal("an invalid keyspace name was accepted")
	}
}

// TestAppliesSchemaTwice runs the tool against the real CQL server twice
// (idempotent) and opens a store on the result.
func TestAppliesSchemaTwice(t *testing.T) {
	cfg := cqltest.Config(t, "t_tool")
	hosts, ks := strings.Join(cfg.Hosts, ","), cfg.Keyspace
	t.Cleanup(func() { scylla.DropKeyspace(context.Background(), cfg) })
	args := []string{"-hosts", hosts, "-keyspace", ks, "-replication", "{'class': 'SimpleStrategy', 'replication_factor': 1}"}
	for i := range 2 {
		var out bytes.Buffer
		if err := run(context.Background(), args, &out, os.Stderr); err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
		if !strings.Contains(out.String(), ks) {
			t.Fatalf("output %q does not name the keyspace", out.String())
		}
	}
	s, err := scylla.New(context.Background(), cfg)
	if err != nil {
		t.Fatalf("store on the applied schema: %v", err)
	}
	defer s.Close()
	if err := s.Health(context.Background()); err != nil {
		t.Fatalf("health: %v", err)
	}
}
