package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/autopush-go/autopush/internal/mozlog"
	"github.com/autopush-go/autopush/internal/token"
	"github.com/autopush-go/autopush/stack"
	"github.com/autopush-go/autopush/storage/embedded"
)

// options are the dev server's few settings; each tier's full settings
// stay available through AUTOCONNECT__/AUTOENDPOINT__ in production.
type options struct {
	dataDir     string
	wsListen    string
	nodeListen  string
	httpListen  string
	endpointURL string
	logLevel    string
}

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr, nil); err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "devserver:", err)
		os.Exit(1)
	}
}

func parse(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("devserver", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.dataDir, "data-dir", "./data", "embedded store and the dev CRYPTO_KEY")
	fs.StringVar(&o.wsListen, "ws", "127.0.0.1:8080", "websocket listen address (Firefox's dom.push.serverURL)")
	fs.StringVar(&o.nodeListen, "node", "127.0.0.1:8081", "internal node API listen address")
	fs.StringVar(&o.httpListen, "http", "127.0.0.1:8082", "WebPush HTTP API listen address")
	fs.StringVar(&o.endpointURL, "endpoint-url", "", "public base URL of endpoints (default: http:// + the HTTP address)")
	fs.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	return o, fs.Parse(args)
}

// run starts both tiers and blocks until a signal (or until ctx is done,
// in tests: ready then receives the running stack).
func run(ctx context.Context, args []string, stdout, stderr io.Writer, ready chan<- *stack.Stack) error {
	o, err := parse(args, stderr)
	if err != nil {
		return err
	}
	log := mozlog.New(stdout, "devserver", o.logLevel)
	if err := os.MkdirAll(o.dataDir, 0o700); err != nil {
		return err
	}
	key, err := devKey(filepath.Join(o.dataDir, "crypto_key"))
	if err != nil {
		return err
	}
	store, err := embedded.Open(embedded.Config{Dir: filepath.Join(o.dataDir, "store"), Logger: log})
	if err != nil {
		return err
	}
	defer store.Close()

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sig)

	cfg := stack.DefaultConfig()
	cfg.WSListen, cfg.NodeListen, cfg.HTTPListen = o.wsListen, o.nodeListen, o.httpListen
	cfg.EndpointURL, cfg.CryptoKey = o.endpointURL, key
	st, err := stack.New(cfg, store, log)
	if err == nil {
		err = st.Start()
	}
	if err != nil {
		return err
	}
	log.Info("dev server ready", "websocket", "ws://"+st.WSAddr()+"/", "push_api", st.HTTPAddr(),
		"node_api", st.NodeAddr(), "data_dir", o.dataDir)
	fmt.Fprintf(stderr, "\nautopush-go dev server\n  Firefox: dom.push.serverURL = ws://%s/  (and dom.push.testing.allowInsecureServerURL = true)\n  Push API: http://%s\n\n", st.WSAddr(), st.HTTPAddr())
	if ready != nil {
		ready <- st
	}
	select {
	case <-sig:
	case <-ctx.Done():
	}
	stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return st.Shutdown(stopCtx)
}

// devKey returns the CRYPTO_KEY kept at path, making one on first start.
func devKey(path string) (string, error) {
	if b, err := os.ReadFile(path); err == nil {
		key := strings.TrimSpace(string(b))
		if _, err := token.ParseKeys(key); err != nil {
			return "", fmt.Errorf("%s: %w", path, err)
		}
		return key, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	key := token.GenerateKey()
	if err := os.WriteFile(path, []byte(key+"\n"), 0o600); err != nil {
		return "", err
	}
	return key, nil
}
