package docs_test

import (
	"context"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/autopush-go/autopush/stack"
	"github.com/autopush-go/autopush/stack/stacktest"
)

// schemathesisExamples bounds each operation's generated cases per run.
const schemathesisExamples = 40

// TestSchemathesis runs the schema-driven fuzzer schemathesis (PyPI,
// pinned in the Makefile; make py-deps installs it in a venv, tools/test.sh
// sets SCHEMATHESIS to its "st") against a live stack, driven by openapi.yaml: every check it
// has (no 5xx, documented statuses, content types, headers and bodies,
// 405 with Allow for undocumented methods, schema-violating requests
// refused) but one, a bounded number of examples with a fixed seed. The
// one left out, positive_data_acceptance, wants every schema-valid
// request accepted, but OpenAPI 3.0 cannot say that a body requires
// Content-Encoding, nor which crypto headers each coding needs, nor that
// a negative TTL (which the TTL pattern lets through, to be refused with
// errno 114, as the reference does) is refused. Two runs: one
// with the tokens it makes up, one with a live endpoint's token so that
// pushes reach the header and body rules and the routing, and the
// stack's broadcast token so that publishes reach storage. The first
// gives the push API (POST /push, GET /push) the stack's key.
func TestSchemathesis(t *testing.T) {
	st := os.Getenv("SCHEMATHESIS")
	if st == "" {
		msg := "SCHEMATHESIS is not set: make py-deps installs the pinned schemathesis and prints the variable to set"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	// A token of 16+ characters, as broadcast-tokens requires.
	const broadcastToken = "schemathesis-broadcast-token"
	// Bridge auth keys open the registration API: registrations of the
	// webpush type reach storage (no bridge app is configured, so the
	// others stop at their app id).
	s := stacktest.StartWith(t, stacktest.Options{Config: func(c *stack.Config) {
		c.API.BroadcastTokens = []string{broadcastToken}
		c.API.BridgeAuthKeys = []string{"schemathesis-bridge-auth-key"}
		// Receipts on: their routes answer for real (401 without VAPID).
		c.API.Receipts = true
	}})
	sub := s.Subscribe(t, "")
	sub.Close() // pushes are stored: the run never waits on a client
	u, err := url.Parse(sub.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	token := path.Base(u.Path)
	for _, run := range []struct {
		name   string
		config string
	}{
		{"made-up tokens", "schemathesis/pushkey.toml"},
		{"a live endpoint", "schemathesis/schemathesis.toml"},
	} {
		t.Run(run.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
			defer cancel()
			config, err := filepath.Abs(run.config)
			if err != nil {
				t.Fatal(err)
			}
			args := []string{"--config-file", config}
			schema, err := filepath.Abs("openapi.yaml")
			if err != nil {
				t.Fatal(err)
			}
			// One worker: with two, hypothesis parses lambdas' source
			// (ast.parse) on two threads at once, which CPython 3.11 does
			// not survive ("SystemError: AST constructor recursion depth
			// mismatch", CPython gh-106905, a runtime error of the run,
			// not a finding); one is as fast.
			args = append(args, "run", schema, "--url", s.EndpointURL(),
				"--checks", "all", "--exclude-checks", "positive_data_acceptance", "--max-examples", strconv.Itoa(schemathesisExamples), "--seed", "20261123",
				"--workers", "1", "--no-color", "--generation-database", "none",
				"--request-timeout", "20", "--report", "junit", "--report-dir", t.TempDir())
			cmd := exec.CommandContext(ctx, st, args...)
			// Its cache (.schemathesis/) goes to the working directory: not
			// the checkout.
			cmd.Dir = t.TempDir()
			cmd.Env = append(os.Environ(), "ST_TOKEN="+token, "ST_BROADCAST_TOKEN="+broadcastToken, "ST_PUSH_KEY="+stacktest.PushAPIKey, "SCHEMATHESIS_HOOKS=")
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("schemathesis %s: %v\n%s", run.name, err, out)
			}
			t.Logf("schemathesis %s:\n%s", run.name, tail(out, 25))
		})
	}
	// The live run reached the routing: some of its pushes were taken.
	if n := len(s.Stored(t, sub.UAID)); n == 0 {
		t.Fatal("no push of the live run was stored: it never got past the checks")
	} else {
		t.Logf("the live run stored %d pushes", n)
	}
	// And published broadcasts.
	if all, err := s.Store.Broadcasts(t.Context()); err != nil || len(all) == 0 {
		t.Fatalf("no broadcast of the live run was stored (%v): its publishes never got past the checks", err)
	} else {
		t.Logf("the live run published %d broadcasts", len(all))
	}
}

// tail returns the last n lines of b.
func tail(b []byte, n int) []byte {
	for i := len(b) - 2; i >= 0; i-- {
		if b[i] == '\n' {
			if n--; n == 0 {
				return b[i+1:]
			}
		}
	}
	return b
}
