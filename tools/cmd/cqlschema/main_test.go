package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"testing"

	"github.com/autopush-go/autopush/storage/scylla"
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
// (idempotent) and opens a store on the result. The keyspace is left on the
// throwaway test node.
func TestAppliesSchemaTwice(t *testing.T) {
	hosts := os.Getenv("CQL_HOSTS")
	if hosts == "" {
		const hint = "CQL_HOSTS not set: run `make test`, which starts Cassandra via tools/cql/start.sh"
		if os.Getenv("CI") == "true" {
			t.Fatal(hint)
		}
		t.Skip(hint)
	}
	b := make([]byte, 6)
	rand.Read(b)
	ks := "t_tool_" + hex.EncodeToString(b)
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
	cfg := scylla.DefaultConfig()
	cfg.Hosts, cfg.Keyspace, cfg.Consistency = strings.Split(hosts, ","), ks, "ONE"
	s, err := scylla.New(context.Background(), cfg)
	if err != nil {
		t.Fatalf("store on the applied schema: %v", err)
	}
	defer s.Close()
	if err := s.Health(context.Background()); err != nil {
		t.Fatalf("health: %v", err)
	}
}
