package main

import (
	"context"
	"crypto/ecdh"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/gobwas/ws"
	"github.com/google/uuid"

	"github.com/autopush-go/autopush/internal/pushcrypto"
)

func runSmoke(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("pushsend smoke", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f sendFlags
	f.register(fs)
	wsURL := fs.String("ws", "", "the push service's websocket URL, as Firefox's dom.push.serverURL (ws:// or wss://)")
	v1 := fs.Bool("v1", false, "subscribe without an applicationServerKey (a v1 endpoint; VAPID optional)")
	fs.Usage = func() {
		fmt.Fprint(stderr, `usage: pushsend smoke -ws URL [flags]

An end-to-end check of a deployment, from where it runs: connects to the
websocket as a user agent (hello), subscribes a new channel (register,
with a fresh VAPID key as applicationServerKey unless -v1), sends a push
to the endpoint the service returned (encrypted and VAPID-signed, as
"send" does), waits for the notification on the websocket, decrypts it,
checks it, acks it, unsubscribes and closes. Each step is printed with
its time. Exit status 0 when the message came back intact.

-vapid-private signs with that key instead of a fresh one. -data defaults
to a random text.

Flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 || *wsURL == "" {
		fs.Usage()
		return usageErr("-ws is required")
	}
	if f.data == "" && f.dataFile == "" {
		f.data = "pushsend smoke " + uuid.NewString()
	}
	m, err := f.message()
	if err != nil {
		return err
	}
	if m.signer == nil && !*v1 {
		if m.signer, err = pushcrypto.NewVAPIDSigner(f.subject); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	return smoke(ctx, *wsURL, *v1, m, stdout)
}

// smoke runs the check; every step's failure says which step.
func smoke(ctx context.Context, wsURL string, v1 bool, m message, out io.Writer) error {
	start := time.Now()
	step := func(format string, a ...any) {
		fmt.Fprintf(out, "%7.1f ms  %s\n", float64(time.Since(start).Microseconds())/1000, fmt.Sprintf(format, a...))
	}
	c, err := dialUA(ctx, wsURL)
	if err != nil {
		return fmt.Errorf("connect %s: %w", wsURL, err)
	}
	defer c.conn.Close()
	step("connected to %s", wsURL)

	c.send(map[string]any{"messageType": "hello", "use_webpush": true, "broadcasts": map[string]any{}})
	hello, err := c.expect("hello")
	if err != nil {
		return fmt.Errorf("hello: %w", err)
	}
	step("hello: uaid %v", hello["uaid"])

	chid := uuid.NewString()
	reg := map[string]any{"messageType": "register", "channelID": chid}
	if !v1 {
		reg["key"] = m.signer.Public
	}
	c.send(reg)
	r, err := c.expect("register")
	if err != nil {
		return fmt.Errorf("register: %w", err)
	}
	endpoint, _ := r["pushEndpoint"].(string)
	if r["status"] != 200.0 || endpoint == "" {
		return fmt.Errorf("register: status %v", r["status"])
	}
	step("registered channel %s: %s", chid, endpoint)

	priv, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		return err
	}
	var sub subscription
	sub.Endpoint = endpoint
	sub.Keys.P256DH = base64.RawURLEncoding.EncodeToString(priv.PublicKey().Bytes())
	secret := make([]byte, pushcrypto.AuthSecretLen)
	rand.Read(secret)
	sub.Keys.Auth = base64.RawURLEncoding.EncodeToString(secret)

	resp, err := push(ctx, sub, m)
	if err != nil {
		return fmt.Errorf("push: %w", err)
	}
	if err := resp.err(); err != nil {
		resp.print(out, false)
		return err
	}
	step("pushed %d bytes (%s): %d %s, Location %s", len(m.data), m.encoding, resp.Status,
		http.StatusText(resp.Status), resp.Header.Get("Location"))

	n, err := c.expect("notification")
	if err != nil {
		return fmt.Errorf("waiting for the notification: %w", err)
	}
	if n["channelID"] != chid {
		return fmt.Errorf("notification for channel %v, want %s", n["channelID"], chid)
	}
	plain, err := decryptNotification(n, priv, secret)
	if err != nil {
		return fmt.Errorf("notification: %w", err)
	}
	if string(plain) != string(m.data) {
		return fmt.Errorf("notification decrypted to %q, sent %q", plain, m.data)
	}
	step("received and decrypted: %q", plain)

	c.send(map[string]any{"messageType": "ack", "updates": []any{map[string]any{"channelID": chid, "version": n["version"], "code": 100}}})
	c.send(map[string]any{"messageType": "unregister", "channelID": chid})
	if _, err := c.expect("unregister"); err != nil {
		return fmt.Errorf("unregister: %w", err)
	}
	step("acked and unregistered")
	c.close()
	fmt.Fprintln(out, "OK")
	return nil
}

// decryptNotification opens a notification's data with the subscription's
// keys, as its headers say it was encrypted.
func decryptNotification(n map[string]any, priv *ecdh.PrivateKey, secret []byte) ([]byte, error) {
	data, _ := n["data"].(string)
	body, err := base64.RawURLEncoding.DecodeString(data)
	if err != nil {
		return nil, fmt.Errorf("data is not base64url: %w", err)
	}
	hdrs, _ := n["headers"].(map[string]any)
	switch enc, _ := hdrs["encoding"].(string); enc {
	case "aes128gcm":
		return pushcrypto.DecryptAES128GCM(body, priv, secret)
	case "aesgcm":
		encryption, _ := hdrs["encryption"].(string)
		cryptoKey, _ := hdrs["crypto_key"].(string)
		salt, dh, rs, err := pushcrypto.ParseAESGCMHeaders(encryption, cryptoKey)
		if err != nil {
			return nil, err
		}
		return pushcrypto.DecryptAESGCM(body, salt, dh, priv, secret, pushcrypto.RecordSize(rs))
	default:
		return nil, fmt.Errorf("unknown encoding %q", enc)
	}
}

// uaConn is a minimal websocket user agent: JSON text messages out,
// text messages in, server pings answered.
type uaConn struct {
	conn net.Conn
	r    io.Reader
	ctx  context.Context
	// listening: reads wait as long as the connection lives (the
	// server's pings keep it), not until ctx's deadline or a minute.
	listening bool
	wmu       sync.Mutex // a frame is written whole (listen's stop writes too)
}

func dialUA(ctx context.Context, url string) (*uaConn, error) {
	d := ws.Dialer{Protocols: []string{"push-notification"}}
	conn, br, _, err := d.Dial(ctx, url)
	if err != nil {
		return nil, err
	}
	c := &uaConn{conn: conn, r: conn, ctx: ctx}
	if br != nil {
		// The server's first bytes may already be buffered.
		c.r = io.MultiReader(br, conn)
	}
	return c, nil
}

func (c *uaConn) send(v any) {
	b, _ := json.Marshal(v)
	c.write(ws.NewTextFrame(b), c.deadline())
}

func (c *uaConn) write(f ws.Frame, deadline time.Time) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.conn.SetWriteDeadline(deadline)
	ws.WriteFrame(c.conn, ws.MaskFrameInPlace(f))
}

func (c *uaConn) deadline() time.Time {
	if d, ok := c.ctx.Deadline(); ok {
		return d
	}
	return time.Now().Add(time.Minute)
}

// expect returns the next message of type want, skipping others (a
// notification may arrive before an unregister reply).
func (c *uaConn) expect(want string) (map[string]any, error) {
	for {
		text, err := c.next()
		if err != nil {
			return nil, err
		}
		var m map[string]any
		if err := json.Unmarshal(text, &m); err != nil {
			return nil, fmt.Errorf("server sent non-JSON %q", text)
		}
		if m["messageType"] == want {
			return m, nil
		}
	}
}

// maxFrame bounds what is read from the server.
const maxFrame = 1 << 20

func (c *uaConn) next() ([]byte, error) {
	if c.listening {
		c.conn.SetReadDeadline(time.Time{})
	} else {
		c.conn.SetReadDeadline(c.deadline())
	}
	br := c.r
	for {
		h, err := ws.ReadHeader(br)
		if err != nil {
			return nil, err
		}
		if h.Length > maxFrame {
			return nil, fmt.Errorf("server frame of %d bytes", h.Length)
		}
		payload := make([]byte, h.Length)
		if _, err := io.ReadFull(br, payload); err != nil {
			return nil, err
		}
		if h.Masked {
			ws.Cipher(payload, h.Mask, 0)
		}
		switch h.OpCode {
		case ws.OpText:
			return payload, nil
		case ws.OpPing:
			c.write(ws.NewPongFrame(payload), c.deadline())
		case ws.OpClose:
			code, reason := ws.ParseCloseFrameData(payload)
			return nil, fmt.Errorf("closed by the server: %d %s", code, reason)
		}
	}
}

func (c *uaConn) close() {
	c.write(ws.NewCloseFrame(ws.NewCloseFrameBody(ws.StatusNormalClosure, "")), time.Now().Add(time.Second))
}
