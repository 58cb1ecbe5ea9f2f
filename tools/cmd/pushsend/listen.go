package main

import (
	"cmp"
	"context"
	"crypto/ecdh"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/autopush-go/autopush/internal/pushcrypto"
	"github.com/autopush-go/autopush/internal/vapid"
)

// listenState is a test user agent's identity, kept between runs so that
// a run comes back to the messages stored while it was away: the uaid the
// server gave it, its one channel and the subscription's private keys.
type listenState struct {
	WS        string `json:"ws"`
	UAID      string `json:"uaid"`
	ChannelID string `json:"channelID"`
	// AppKey is the applicationServerKey the channel is bound to ("":
	// none, a v1 endpoint).
	AppKey   string `json:"applicationServerKey,omitempty"`
	Endpoint string `json:"endpoint"`
	// P256DHPrivate is the subscription's ECDH private key, base64url;
	// Auth its auth secret. Together they decrypt its messages.
	P256DHPrivate string `json:"p256dhPrivate"`
	Auth          string `json:"auth"`
}

type listenFlags struct {
	ws, state, appKey, subFile string
	count                      int
	noAck, fresh               bool
	timeout                    time.Duration
}

func runListen(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("pushsend listen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f listenFlags
	fs.StringVar(&f.ws, "ws", cmp.Or(os.Getenv("PUSHSEND_WS"), "ws://127.0.0.1:8080/"), "the push service's websocket URL (env PUSHSEND_WS; make run's by default)")
	fs.StringVar(&f.state, "state", defaultStatePath(), "the file keeping this user agent's identity and keys between runs (written 0600)")
	fs.StringVar(&f.appKey, "vapid-key", "", "bind the subscription to this VAPID public key (base64url, or @FILE: pushsend keys' output or the key alone); none: a v1 endpoint")
	fs.StringVar(&f.subFile, "sub-file", "", "also write the subscription JSON to this file")
	fs.IntVar(&f.count, "count", 0, "exit after this many messages (0: run until interrupted)")
	fs.BoolVar(&f.noAck, "no-ack", false, "do not ack: the server keeps the messages and sends them again on the next connection")
	fs.BoolVar(&f.fresh, "new", false, "forget the state file's identity and subscribe afresh")
	fs.DurationVar(&f.timeout, "timeout", 0, "give up (exit 1) after this long (0: no limit)")
	fs.Usage = func() {
		fmt.Fprint(stderr, `usage: pushsend listen [flags]

A test user agent, in place of a browser: connects to the websocket,
subscribes one channel (bound to -vapid-key's public key if given), and
prints on standard output first the subscription's JSON, as
PushSubscription.toJSON() gives it to an application (give it to
"pushsend send -sub", web-push, pywebpush or webpush-go), then one JSON
line per message: its channelID, version, ttl and crypto headers, and the
decrypted payload as "text" (or "base64" when it is not UTF-8, "error"
when it does not decrypt). Each message is acked unless -no-ack.

Its identity (uaid, channel, keys) is kept in -state, so the next run
with the same file is the same subscription and receives what was stored
while it was away. Notes go to standard error. Exit status 0 when
interrupted (SIGINT, SIGTERM) or after -count messages.

Flags:
`)
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if f.count < 0 || f.timeout < 0 {
		return usageErr("-count and -timeout cannot be negative")
	}
	if f.state == "" {
		return usageErr("-state is required (no user config directory to keep it in)")
	}
	appKey, err := readAppKey(f.appKey)
	if err != nil {
		return err
	}
	f.appKey = appKey
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if f.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, f.timeout)
		defer cancel()
	}
	return listen(ctx, f, stdout, stderr)
}

// defaultStatePath is listen's state file when -state is not given: in
// the user's config directory, never in the working tree.
func defaultStatePath() string {
	dir, err := os.UserConfigDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "pushsend", "listen.json")
}

// readAppKey reads -vapid-key: a public key, or @FILE holding one alone
// or pushsend keys' JSON.
func readAppKey(arg string) (string, error) {
	key := arg
	if file, ok := strings.CutPrefix(arg, "@"); ok {
		b, err := os.ReadFile(file)
		if err != nil {
			return "", usageErr("-vapid-key: %v", err)
		}
		var pair struct{ PublicKey string }
		if json.Unmarshal(b, &pair) == nil && pair.PublicKey != "" {
			key = pair.PublicKey
		} else {
			key = strings.TrimSpace(string(b))
		}
	}
	if key == "" {
		return "", nil
	}
	if _, err := vapid.DecodeKey(key); err != nil {
		return "", usageErr("-vapid-key is not a VAPID public key: %v", err)
	}
	return key, nil
}

// listen runs the user agent until ctx ends or count messages came.
func listen(ctx context.Context, f listenFlags, stdout, stderr io.Writer) error {
	st, err := loadState(f, stderr)
	if err != nil {
		return err
	}
	c, err := dialUA(ctx, f.ws)
	if err != nil {
		return fmt.Errorf("connect %s: %w", f.ws, err)
	}
	defer c.conn.Close()
	c.listening = true
	// An interrupt waits for the message in hand to be printed and acked:
	// one printed is not sent again.
	var handling sync.Mutex
	go func() {
		<-ctx.Done()
		handling.Lock()
		defer handling.Unlock()
		c.close()
		c.conn.Close()
	}()
	ended := func(err error) error {
		if ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil // interrupted: the state is saved
		}
		return err
	}

	hello := map[string]any{"messageType": "hello", "use_webpush": true}
	if st.UAID != "" {
		hello["uaid"], hello["channelIDs"] = st.UAID, []string{st.ChannelID}
	}
	c.send(hello)
	h, err := c.expect("hello")
	if err != nil {
		return ended(fmt.Errorf("hello: %w", err))
	}
	uaid, _ := h["uaid"].(string)
	if st.UAID != "" && uaid != st.UAID {
		fmt.Fprintf(stderr, "pushsend listen: the server no longer knows user agent %s: subscribing afresh (the old subscription is gone)\n", st.UAID)
		st = listenState{WS: f.ws, AppKey: f.appKey}
	}
	if st.ChannelID == "" {
		if st, err = subscribe(c, uaid, st); err != nil {
			return ended(err)
		}
		if err := saveState(f.state, st); err != nil {
			return err
		}
	}
	if err := printSubscription(st, f.subFile, stdout); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "pushsend listen: user agent %s kept in %s; waiting for messages (Ctrl-C to stop)\n", uaid, f.state)
	return ended(receive(c, st, f, &handling, stdout))
}

// loadState reads the state file, or starts a new identity when there is
// none, -new says so, or it was made for another server or key.
func loadState(f listenFlags, stderr io.Writer) (listenState, error) {
	fresh := listenState{WS: f.ws, AppKey: f.appKey}
	if f.fresh {
		return fresh, nil
	}
	b, err := os.ReadFile(f.state)
	if errors.Is(err, os.ErrNotExist) {
		return fresh, nil
	}
	if err != nil {
		return fresh, fmt.Errorf("state: %w", err)
	}
	var st listenState
	if err := json.Unmarshal(b, &st); err != nil || st.UAID == "" || st.ChannelID == "" {
		return fresh, fmt.Errorf("state %s is not a pushsend listen state file (remove it or use -new)", f.state)
	}
	if st.WS != f.ws || st.AppKey != f.appKey {
		fmt.Fprintf(stderr, "pushsend listen: %s was made for %s, key %q: subscribing afresh\n", f.state, st.WS, st.AppKey)
		return fresh, nil
	}
	return st, nil
}

// subscribe registers a new channel with new keys.
func subscribe(c *uaConn, uaid string, st listenState) (listenState, error) {
	st.UAID, st.ChannelID = uaid, uuid.NewString()
	reg := map[string]any{"messageType": "register", "channelID": st.ChannelID}
	if st.AppKey != "" {
		reg["key"] = st.AppKey
	}
	c.send(reg)
	r, err := c.expect("register")
	if err != nil {
		return st, fmt.Errorf("register: %w", err)
	}
	st.Endpoint, _ = r["pushEndpoint"].(string)
	if r["status"] != 200.0 || st.Endpoint == "" {
		return st, fmt.Errorf("register: status %v", r["status"])
	}
	priv, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		return st, err
	}
	secret := make([]byte, pushcrypto.AuthSecretLen)
	rand.Read(secret)
	st.P256DHPrivate = base64.RawURLEncoding.EncodeToString(priv.Bytes())
	st.Auth = base64.RawURLEncoding.EncodeToString(secret)
	return st, nil
}

// saveState writes the state whole or not at all (it holds private keys:
// 0600).
func saveState(path string, st listenState) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("state: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("state: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("state: %w", err)
	}
	return nil
}

// keys are the subscription's private key and auth secret.
func (st listenState) keys() (*ecdh.PrivateKey, []byte, error) {
	b, err := base64.RawURLEncoding.DecodeString(st.P256DHPrivate)
	if err != nil {
		return nil, nil, fmt.Errorf("state's p256dhPrivate: %w", err)
	}
	priv, err := ecdh.P256().NewPrivateKey(b)
	if err != nil {
		return nil, nil, fmt.Errorf("state's p256dhPrivate: %w", err)
	}
	secret, err := base64.RawURLEncoding.DecodeString(st.Auth)
	if err != nil || len(secret) != pushcrypto.AuthSecretLen {
		return nil, nil, fmt.Errorf("state's auth is not a %d-byte secret", pushcrypto.AuthSecretLen)
	}
	return priv, secret, nil
}

// printSubscription prints the subscription's JSON on one line, and
// writes it to subFile when given.
func printSubscription(st listenState, subFile string, stdout io.Writer) error {
	priv, _, err := st.keys()
	if err != nil {
		return err
	}
	var sub subscription
	sub.Endpoint = st.Endpoint
	sub.Keys.P256DH = base64.RawURLEncoding.EncodeToString(priv.PublicKey().Bytes())
	sub.Keys.Auth = st.Auth
	b, err := json.Marshal(sub)
	if err != nil {
		return err
	}
	if subFile != "" {
		if err := os.WriteFile(subFile, append(b, '\n'), 0o600); err != nil {
			return fmt.Errorf("-sub-file: %w", err)
		}
	}
	_, err = fmt.Fprintf(stdout, "%s\n", b)
	return err
}

// received is one message as listen prints it.
type received struct {
	ChannelID string         `json:"channelID"`
	Version   string         `json:"version"`
	TTL       any            `json:"ttl,omitempty"`
	Headers   map[string]any `json:"headers,omitempty"`
	Text      *string        `json:"text,omitempty"`
	Base64    string         `json:"base64,omitempty"`
	Error     string         `json:"error,omitempty"`
}

// receive prints and acks each notification until count of them came.
func receive(c *uaConn, st listenState, f listenFlags, handling *sync.Mutex, stdout io.Writer) error {
	priv, secret, err := st.keys()
	if err != nil {
		return err
	}
	in := inbox{c: c, priv: priv, secret: secret, noAck: f.noAck, handling: handling, out: json.NewEncoder(stdout)}
	in.out.SetEscapeHTML(false)
	for n := 0; f.count == 0 || n < f.count; n++ {
		m, err := c.expect("notification")
		if err != nil {
			return fmt.Errorf("waiting for messages: %w", err)
		}
		if err := in.handle(m); err != nil {
			return err
		}
	}
	c.close()
	return nil
}

// inbox is what handles a notification: the connection acking it, the
// subscription's keys, and the output.
type inbox struct {
	c        *uaConn
	priv     *ecdh.PrivateKey
	secret   []byte
	noAck    bool
	handling *sync.Mutex // held from print to ack: an interrupt waits
	out      *json.Encoder
}

// handle prints one notification and acks it (unless noAck).
func (in inbox) handle(m map[string]any) error {
	in.handling.Lock()
	defer in.handling.Unlock()
	r := received{TTL: m["ttl"]}
	r.ChannelID, _ = m["channelID"].(string)
	r.Version, _ = m["version"].(string)
	r.Headers, _ = m["headers"].(map[string]any)
	code := 100 // received
	switch plain, err := decryptNotification(m, in.priv, in.secret); {
	case m["data"] == nil:
		empty := ""
		r.Text = &empty // a push without payload
	case err != nil:
		r.Error, code = err.Error(), 101 // did not decrypt
	case utf8.Valid(plain):
		text := string(plain)
		r.Text = &text
	default:
		r.Base64 = base64.RawURLEncoding.EncodeToString(plain)
	}
	if err := in.out.Encode(r); err != nil {
		return err
	}
	if !in.noAck {
		in.c.send(map[string]any{"messageType": "ack", "updates": []any{
			map[string]any{"channelID": r.ChannelID, "version": r.Version, "code": code}}})
	}
	return nil
}
