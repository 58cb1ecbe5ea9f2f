package single

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/autopush-go/autopush/internal/devcert"
	"github.com/autopush-go/autopush/internal/gctune"
	"github.com/autopush-go/autopush/internal/listener"
	"github.com/autopush-go/autopush/internal/procs"
	"github.com/autopush-go/autopush/internal/settings"
	"github.com/autopush-go/autopush/internal/token"
	"github.com/autopush-go/autopush/stack"
	"github.com/autopush-go/autopush/stack/backup"
	"github.com/autopush-go/autopush/storage"
)

// ReadyMsg is the message of the line the server logs once it serves,
// whatever log-level says: its fields name the addresses (websocket,
// ws_listen, node_api, push_api, push_api_tls, metrics, endpoint_url)
// and the GC target in effect (gogc).
const ReadyMsg = "autopush ready"

// SettingsMsg is the message of the line, logged at start, whose
// "settings" field maps every setting to its value as the running tiers
// hold it; secrets as "sha256:" and the first 12 hex digits of their
// hash, so two nodes can be compared without showing them.
const SettingsMsg = "settings in effect"

// Server is a running single-node server. Shutdown is called once.
type Server struct {
	st      *stack.Stack
	cfg     Config
	log     *slog.Logger
	pushKey string // push-api-key-file's key
}

// Start applies the process settings (the crypto-key file, the GC target
// unless GOGC is set), then starts both tiers over store (the caller's:
// it stays open) and logs SettingsMsg and ReadyMsg. The connection node
// raises the soft fd limit to the hard one as it starts.
func Start(cfg Config, store storage.Store, log *slog.Logger) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if path := cfg.Own.CryptoKeyFile; path != "" {
		key, made, err := keptFile(path, "crypto-key-file", token.GenerateKey, checkCryptoKey)
		if err != nil {
			return nil, err
		}
		if made {
			// The first start's expected step (the shipped env file asks
			// for it), not a fault: info, so that a clean start has no
			// warning line.
			log.Info("made a new crypto-key: back it up with the data, endpoints need it", "file", path)
		}
		cfg.Engine.CryptoKey, cfg.API.CryptoKey = key, key
	}
	var pushKey string
	if path := cfg.Own.PushAPIKeyFile; path != "" {
		key, made, err := keptFile(path, "push-api-key-file", newPushAPIKey, checkPushAPIKey)
		if err != nil {
			return nil, err
		}
		if made {
			log.Info("made a new push API key", "file", path)
		}
		pushKey = key
		cfg.API.PushAPIKeys = append(slices.Clone(cfg.API.PushAPIKeys), key)
	}
	if dir := cfg.Own.TLSDevCertDir; dir != "" {
		if _, made, err := devcert.Ensure(dir); err != nil {
			return nil, fmt.Errorf("single: tls-dev-cert-dir: %w", err)
		} else if made {
			log.Info("made a development certificate for tls-listen (loopback names only)", "dir", dir)
		}
	}
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(cfg.Engine.GCPercent)
	}
	st, err := stack.New(cfg.Stack(), store, log)
	if err != nil {
		return nil, err
	}
	serveBackups(st, store, cfg, log)
	if err := st.Start(); err != nil {
		return nil, cfg.named(err)
	}
	s := &Server{st: st, cfg: cfg, log: log, pushKey: pushKey}
	log.Info(SettingsMsg, "settings", s.InEffect())
	// At any log level: supervisors, scripts and people wait for it.
	ready := slog.NewRecord(time.Now(), slog.LevelInfo, ReadyMsg, 0)
	ready.Add("websocket", "ws://"+st.WSAddr()+"/", "ws_listen", st.WSAddr(), "node_api", st.NodeAddr(),
		"push_api", st.HTTPAddr(), "push_api_tls", st.API().TLSAddr(), "metrics", st.MetricsAddr(),
		"endpoint_url", st.EndpointURL(), "gogc", gcPercent(), "gomaxprocs", runtime.GOMAXPROCS(0))
	log.Handler().Handle(context.Background(), ready)
	return s, nil
}

// TrustDevCert is what the server prints at start when tls-dev-cert-dir
// is set: how to make the usual clients trust its CA ("" otherwise).
func (s *Server) TrustDevCert() string {
	dir := s.cfg.Own.TLSDevCertDir
	if dir == "" {
		return ""
	}
	ca, err := filepath.Abs(devcert.In(dir).CA)
	if err != nil {
		ca = devcert.In(dir).CA
	}
	return fmt.Sprintf(`
The push API also serves https at %s with a development certificate
(loopback names only). Make clients trust its CA, in each shell that runs one
(Node, Python requests, Go and OpenSSL):

    export NODE_EXTRA_CA_CERTS=%s REQUESTS_CA_BUNDLE=%s SSL_CERT_FILE=%s

`, s.st.API().TLSAddr(), ca, ca, ca)
}

// serveBackups adds backup.Route to metrics-listen when the store can
// write a checkpoint of itself (the embedded one): autopush backup asks
// the running node, which holds the store's lock, to write the backup.
// cfg's crypto-key is the one read from crypto-key-file.
func serveBackups(st *stack.Stack, store storage.Store, cfg Config, log *slog.Logger) {
	cp, ok := store.(backup.Checkpointer)
	if !ok {
		return
	}
	files := BackupFiles(cfg)
	st.API().AlsoOps(backup.Route, backup.Handler(cp, backup.Token(cfg.Engine.CryptoKey), files, log))
}

// BackupFiles are the key files of cfg a backup holds.
func BackupFiles(cfg Config) backup.Files {
	return backup.Files{CryptoKeyFile: cfg.Own.CryptoKeyFile, PushAPIKeyFile: cfg.Own.PushAPIKeyFile,
		CryptoKeyInline: cfg.Own.CryptoKeyFile == ""}
}

// named gives a listener that could not open (listener.ListenError) the
// server's name of its setting: connect-listen for the connection node's
// listen, endpoint-listen for the endpoint node's (Settings).
func (c Config) named(err error) error {
	var le *listener.ListenError
	if !errors.As(err, &le) {
		return err
	}
	for _, s := range settings.Describe(c.Settings(), "") {
		renamed := s.Name == ConnectPrefix+le.Setting || s.Name == EndpointPrefix+le.Setting
		if (s.Name == le.Setting || renamed) && slices.Contains(s.Parts, le.Tier) {
			le.Setting = s.Name
			break
		}
	}
	return err
}

// Stack is the running stack.
func (s *Server) Stack() *stack.Stack { return s.st }

// InEffect maps every setting to its value as the running tiers and the
// sender hold it (their Config), secrets hashed (see SettingsMsg).
func (s *Server) InEffect() map[string]string {
	running := Config{Engine: s.st.Engine().Config(), API: s.st.API().Config(), Sender: s.cfg.Sender, Own: s.cfg.Own}
	if p := s.st.Pushes(); p != nil {
		running.Sender = p.Config()
	}
	out := map[string]string{}
	for _, st := range settings.Describe(running.Settings(), Prefix) {
		v := st.Default // the running value: Describe reads the struct
		if Secret(st.Name) && v != "" {
			sum := sha256.Sum256([]byte(v))
			v = "sha256:" + hex.EncodeToString(sum[:])[:12]
		}
		out[st.Name] = v
	}
	return out
}

// Shutdown stops gracefully: the connection node drains (its clients
// closed over drain-window, their unacked messages stored), then the API
// tier finishes the requests in flight.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.st.Shutdown(ctx)
	if err == nil {
		s.log.Info("autopush stopped")
	}
	return err
}

// Run starts the server, serves until ctx is done (the main's signal),
// then shuts down within cfg.StopTimeout(). Each SIGHUP meanwhile reloads
// the outbound sender's prototype keys (swrve-keys-file) and the push
// API's clients (push-clients-file), as autoendpoint does.
func Run(ctx context.Context, cfg Config, store storage.Store, log *slog.Logger) error {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	cores := procs.ForLoops(cfg.Engine.EventLoops)
	s, err := Start(cfg, store, log)
	if err != nil {
		return err
	}
	if s.pushKey != "" {
		fmt.Fprint(os.Stderr, s.TryPushAPI())
	}
	fmt.Fprint(os.Stderr, s.TrustDevCert())
	if _, set := os.LookupEnv("GOGC"); !set {
		gcfg := gctune.Defaults(cfg.Engine.GCPercent, cfg.Engine.GCPercentBusy)
		gcfg.Cores = cores
		go gctune.New(gcfg, log).Run(ctx)
	}
	var failed error
	for done := false; !done; {
		select {
		case <-hup:
			s.st.Reload()
		case <-ctx.Done():
			done = true
			log.Info("stopping: draining the connection node, then the API tier")
		case failed = <-s.st.Engine().Failed():
			done = true
			log.Error("no client can reach the connection node any more: the server stops, and exits with an error for its supervisor to restart it", "error", failed)
		}
	}
	stop, cancel := context.WithTimeout(context.Background(), cfg.StopTimeout())
	defer cancel()
	return errors.Join(failed, s.Shutdown(stop))
}

// TryPushAPI is what the server prints at start when push-api-key-file
// is set: the key, and a curl line that sends a push with it.
func (s *Server) TryPushAPI() string {
	base := s.st.EndpointURL()
	if s.cfg.Own.TLSDevCertDir != "" {
		base = "http://" + s.st.HTTPAddr() // the development server's plain listener: curl needs no CA
	}
	where := "sent through Swrve, once swrve-keys-file maps its prototype"
	switch f := s.cfg.Sender.LogConfig.File; {
	case f != "":
		where = "recorded in " + f + " (the log provider records pushes instead of sending them)"
	case s.st.Pushes() == nil:
		where = "refused (503) until a provider is configured: set log-provider-file to record pushes in a file"
	}
	return fmt.Sprintf(`
The push API's key (kept in %s):

    %s

Send a push; it is %s:

    curl -i -X POST %s/push -H 'Authorization: Bearer %s' -H 'Content-Type: application/json' \
      -d '{"platform":"IOS","messagePrototypeKey":"Hello","pushKey":"user-1","message":"Hello from the sender"}'

More in README.md, "Send a mobile push (the sender)".

`, s.cfg.Own.PushAPIKeyFile, s.pushKey, where, base, s.pushKey)
}

// keptFile returns the key kept at path (setting names it in errors),
// checked by check, making one with gen (and the directory) when the
// file does not exist; made says it did.
func keptFile(path, setting string, gen func() string, check func(string) error) (key string, made bool, err error) {
	if key, found, err := readKept(path, setting, check); found || err != nil {
		return key, false, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", false, fmt.Errorf("single: %s: %w", setting, err)
	}
	key = gen()
	// O_EXCL: two processes started at once on one directory must not
	// each write a key of their own.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", false, fmt.Errorf("single: %s: %w", setting, err)
	}
	if _, err := f.WriteString(key + "\n"); err != nil {
		f.Close()
		return "", false, fmt.Errorf("single: %s: %w", setting, err)
	}
	if err := errors.Join(f.Sync(), f.Close()); err != nil {
		return "", false, fmt.Errorf("single: %s: %w", setting, err)
	}
	return key, true, nil
}

// readKept returns the key kept at path, checked by check; found is
// false when there is no such file.
func readKept(path, setting string, check func(string) error) (key string, found bool, err error) {
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return "", false, nil
	case err != nil:
		return "", false, fmt.Errorf("single: %s: %w", setting, err)
	}
	key = strings.TrimSpace(string(b))
	if err := check(key); err != nil {
		return "", true, fmt.Errorf("single: %s %s: %w", setting, path, err)
	}
	return key, true, nil
}

func checkCryptoKey(key string) error {
	_, err := token.ParseKeys(key)
	return err
}

// newPushAPIKey is 32 random bytes, base64url without padding.
func newPushAPIKey() string {
	b := make([]byte, 32)
	rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}

// checkPushAPIKey accepts a key an Authorization header can carry:
// visible ASCII without spaces, at least 16 characters.
func checkPushAPIKey(key string) error {
	if len(key) < 16 {
		return errors.New("the key is shorter than 16 characters")
	}
	for _, c := range []byte(key) {
		if c <= ' ' || c > '~' {
			return errors.New("the key holds a character other than visible ASCII")
		}
	}
	return nil
}

// gcPercent is the GC target the runtime runs with.
func gcPercent() int64 {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return -1
	}
	return int64(s[0].Value.Uint64())
}
