package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/autopush-go/autopush/apitier/apitiertest"
	"github.com/autopush-go/autopush/apitier/pushapi/clients"
	"github.com/autopush-go/autopush/stack"
	"github.com/autopush-go/autopush/stack/stacktest"
)

var bearer = regexp.MustCompile(`(?m)^#   Authorization: Bearer (\S+)$`)

// mint runs the tool with args and returns its key and output.
func mint(t *testing.T, stdin string, args ...string) (string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	if err := run(args, strings.NewReader(stdin), &out, &errOut); err != nil {
		t.Fatalf("pushclient %v: %v (%s)", args, err, errOut.String())
	}
	m := bearer.FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("no key in the output:\n%s", out.String())
	}
	return m[1], out.String()
}

// TestMintedKeyOpensTheAPI: the tool's entry, put in push-clients-file
// as it is printed, makes a client the server accepts with the printed
// key, with the scopes and quotas asked for; the key is not in the entry.
func TestMintedKeyOpensTheAPI(t *testing.T) {
	key, out := mint(t, "", "-name", "marketing", "-scopes", "send,read", "-rate", "0.001")
	entry := out[strings.Index(out, "  marketing:"):]
	if strings.Contains(entry, key) {
		t.Fatalf("the file's entry holds the key:\n%s", entry)
	}
	path := filepath.Join(t.TempDir(), "clients.yaml")
	if err := os.WriteFile(path, []byte("clients:\n"+out), 0o600); err != nil {
		t.Fatal(err)
	}
	st := stacktest.StartWith(t, stacktest.Options{Config: func(c *stack.Config) { c.API.PushClientsFile = path }})
	post := func() apitiertest.Answer {
		return apitiertest.Send(t, http.MethodPost, st.EndpointURL()+"/push",
			[]byte(`{"platform":"IOS","messagePrototypeKey":"Hello","pushKey":"u","message":"m"}`),
			"Authorization", "Bearer "+key, "Content-Type", "application/json")
	}
	a := post()
	if a.Status != http.StatusCreated {
		t.Fatalf("POST /push with the minted key: %d %s", a.Status, a.Body)
	}
	if g := apitiertest.Send(t, http.MethodGet, st.EndpointURL()+a.Header.Get("Location"), nil, "Authorization", "Bearer "+key); g.Status != http.StatusOK {
		t.Errorf("GET of its push: %d", g.Status)
	}
	if again := post(); again.Status != http.StatusTooManyRequests {
		t.Errorf("a second POST within its rate of one per 1,000 s: %d", again.Status)
	}
	other, _ := mint(t, "", "-name", "marketing")
	if other == key {
		t.Fatal("the same key twice")
	}
	if a := apitiertest.Send(t, http.MethodGet, st.EndpointURL()+"/push?state=SENT", nil, "Authorization", "Bearer "+other); a.Status != http.StatusUnauthorized {
		t.Errorf("another minted key, not in the file: %d", a.Status)
	}
}

func TestKeyFromStdin(t *testing.T) {
	key, out := mint(t, "legacy-key\n", "-name", "legacy", "-scopes", "admin", "-key-stdin")
	if key != "legacy-key" || !strings.Contains(out, fmt.Sprintf("key_sha256: %x\n", clients.Hash("legacy-key"))) {
		t.Fatalf("key %q:\n%s", key, out)
	}
	var errOut bytes.Buffer
	if err := run([]string{"-name", "x", "-key-stdin"}, strings.NewReader(""), &bytes.Buffer{}, &errOut); err == nil {
		t.Error("no key on standard input: accepted")
	}
}

func TestRefusesWhatTheServerWould(t *testing.T) {
	for _, args := range [][]string{
		{},                                 // no name
		{"-name", "a b"},                   // bad name
		{"-name", "a", "-scopes", "write"}, // unknown scope
		{"-name", "a", "-rate", "-1"},      // negative rate
		{"-name", "a", "extra"},            // an argument
	} {
		var out bytes.Buffer
		if err := run(args, strings.NewReader(""), &out, &bytes.Buffer{}); err == nil || out.Len() != 0 {
			t.Errorf("%v: %v, printed %q", args, err, out.String())
		}
	}
	for _, arg := range []string{"-h", "-help"} {
		var errOut bytes.Buffer
		if err := run([]string{arg}, strings.NewReader(""), &bytes.Buffer{}, &errOut); !errors.Is(err, flag.ErrHelp) || !strings.Contains(errOut.String(), "push-clients-file") {
			t.Errorf("%s: %v", arg, err)
		}
	}
}
