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

	"github.com/autopush-go/autopush/apitier/apitiertest"
	"github.com/autopush-go/autopush/stack"
	"github.com/autopush-go/autopush/stack/stacktest"
)

// schemathesisExamples bounds each operation's generated cases per run;
// SCHEMATHESIS_EXAMPLES sets another number (make schemathesis: many
// more, too slow for every make test).
const schemathesisExamples = 40

// schemathesisSeed makes make test's runs the same each time;
// SCHEMATHESIS_SEED sets another (make schemathesis: a new one each
// time, logged, so that a failure can be run again).
const schemathesisSeed = 20261123

// TestSchemathesis runs the schema-driven fuzzer schemathesis (PyPI,
// pinned in the Makefile; make py-deps installs it in a venv, tools/test.sh
// sets SCHEMATHESIS to its "st") against a live stack, driven by
// openapi.yaml: every check it has (no 5xx, documented statuses, content
// types, headers and bodies, 405 with Allow for undocumented methods,
// schema-violating requests refused, schema-valid ones accepted), a
// bounded number of examples with a fixed seed. A few operations have
// rules OpenAPI 3.0 cannot state (a body that requires Content-Encoding,
// a token rule that depends on the path's type, a cursor the API gave):
// schemathesis/common.toml lets each of those answer one more status
// to a schema-valid request, saying why. Two runs: one with the tokens
// it makes up, one with live data: an endpoint's token, so that pushes
// reach the header and body rules and the routing; the stack's broadcast
// token, so that publishes reach storage; a VAPID key and its receipt
// subscription, a stored push's message id, a registration and its
// secret, so that the receipt, message and registration routes reach
// theirs. The first gives the push API (POST /push, GET /push) the
// stack's key.
func TestSchemathesis(t *testing.T) {
	st := os.Getenv("SCHEMATHESIS")
	if st == "" {
		msg := "SCHEMATHESIS is not set: make py-deps installs the pinned schemathesis and prints the variable to set"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	examples := schemathesisExamples
	if v := os.Getenv("SCHEMATHESIS_EXAMPLES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("SCHEMATHESIS_EXAMPLES=%q: want a positive number", v)
		}
		examples = n
	}
	seed := uint64(schemathesisSeed)
	if v := os.Getenv("SCHEMATHESIS_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 63)
		if err != nil {
			t.Fatalf("SCHEMATHESIS_SEED=%q: want a number", v)
		}
		seed = n
	}
	t.Logf("%d examples an operation, seed %d", examples, seed)
	// A token of 16+ characters, as broadcast-tokens requires.
	const broadcastToken = "schemathesis-broadcast-token"
	// Bridge auth keys open the registration API: registrations of the
	// webpush type reach storage (no bridge app is configured, so the
	// others stop at their app id).
	s := stacktest.StartWith(t, stacktest.Options{Config: func(c *stack.Config) {
		c.API.BroadcastTokens = []string{broadcastToken}
		c.API.BridgeAuthKeys = []string{"schemathesis-bridge-auth-key"}
		// Receipts on: their routes answer for real. A GET never
		// waits (thousands of them, each up to ?wait=), and webhooks are
		// on, so that the webhook's grammar is checked, not refused
		// whole. Nothing is ever POSTed to one: no push of the run can
		// name a subscription, which takes a valid VAPID signature.
		c.API.Receipts, c.API.ReceiptMaxWait, c.API.ReceiptWebhooks = true, time.Millisecond, true
	}})
	sub := s.Subscribe(t, "")
	sub.Close() // pushes are stored: the run never waits on a client
	u, err := url.Parse(sub.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	token := path.Base(u.Path)
	// A VAPID Authorization good for the longest run (the node takes
	// up to 24 hours), and a receipt subscription of its key.
	signer := stacktest.NewSigner(t)
	jwt, err := signer.Token(s.EndpointURL(), time.Now().Add(23*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	vapid := signer.Authorization(jwt)
	created := apitiertest.Send(t, "POST", s.EndpointURL()+"/receipts", nil, "Authorization", vapid)
	if created.Status != 201 {
		t.Fatalf("POST /receipts: %d %s", created.Status, created.Body)
	}
	receiptID := path.Base(created.Header.Get("Location"))
	// A stored push's message id, for DELETE /m/{message_id}.
	pushed := s.Push(t, sub.Endpoint, sub, "", nil)
	if pushed.Status != 201 {
		t.Fatalf("push: %d %s", pushed.Status, pushed.Body)
	}
	messageID := path.Base(pushed.Header.Get("Location"))
	// A registration of the webpush type (no bridge is configured) and
	// its secret, for the routes under {uaid}.
	reg := apitiertest.Send(t, "POST", s.EndpointURL()+"/v1/webpush/schemathesis/registration", []byte(`{"token":"t"}`))
	if reg.Status != 200 {
		t.Fatalf("register: %d %s", reg.Status, reg.Body)
	}
	registered := reg.JSON(t)
	uaid, _ := registered["uaid"].(string)
	secret, _ := registered["secret"].(string)
	common, err := os.ReadFile("schemathesis/common.toml")
	if err != nil {
		t.Fatal(err)
	}
	for _, run := range []struct {
		name   string
		config string
	}{
		{"made-up tokens", "schemathesis/pushkey.toml"},
		{"live data", "schemathesis/schemathesis.toml"},
	} {
		t.Run(run.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), time.Duration(examples)*15*time.Second)
			defer cancel()
			own, err := os.ReadFile(run.config)
			if err != nil {
				t.Fatal(err)
			}
			config := filepath.Join(t.TempDir(), "schemathesis.toml")
			if err := os.WriteFile(config, append(append(common, '\n'), own...), 0o600); err != nil {
				t.Fatal(err)
			}
			schema, err := filepath.Abs("openapi.yaml")
			if err != nil {
				t.Fatal(err)
			}
			// One worker: with two, hypothesis parses lambdas' source
			// (ast.parse) on two threads at once, which CPython 3.11 does
			// not survive ("SystemError: AST constructor recursion depth
			// mismatch", CPython gh-106905, a runtime error of the run,
			// not a finding); one is as fast. --continue-on-failure: every
			// failure of an operation, not its first only.
			args := []string{"--config-file", config, "run", schema, "--url", s.EndpointURL(),
				"--checks", "all", "--max-examples", strconv.Itoa(examples), "--seed", strconv.FormatUint(seed, 10),
				"--workers", "1", "--no-color", "--generation-database", "none", "--continue-on-failure",
				"--request-timeout", "20", "--report", "junit", "--report-dir", t.TempDir()}
			cmd := exec.CommandContext(ctx, st, args...)
			// Its cache (.schemathesis/) goes to the working directory: not
			// the checkout.
			cmd.Dir = t.TempDir()
			cmd.Env = append(os.Environ(), "ST_TOKEN="+token, "ST_BROADCAST_TOKEN="+broadcastToken, "ST_PUSH_KEY="+stacktest.PushAPIKey,
				"ST_VAPID="+vapid, "ST_RECEIPT_ID="+receiptID, "ST_MESSAGE_ID="+messageID, "ST_UAID="+uaid, "ST_BRIDGE_SECRET="+secret,
				"SCHEMATHESIS_HOOKS=")
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
	// And made receipt subscriptions of its key: more than the test's
	// own.
	_, api := s.Metrics(t)
	subscribed := 0.0
	for _, m := range stacktest.ParseMetrics(t, api) {
		if m.Series == `autoendpoint_receipts_total{result="subscribed"}` {
			subscribed = m.Value
		}
	}
	if subscribed < 2 {
		t.Fatalf("%v receipt subscriptions made: the live run's never got past VAPID", subscribed)
	}
	t.Logf("the live run made %v receipt subscriptions", subscribed-1)
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
