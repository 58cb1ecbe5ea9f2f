package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/autopush-go/autopush/internal/pushcrypto"
	"github.com/autopush-go/autopush/internal/vapid"
)

// subscription is where a push goes, in the form PushSubscription.toJSON()
// gives an application.
type subscription struct {
	Endpoint string `json:"endpoint"`
	Keys     struct {
		P256DH string `json:"p256dh"`
		Auth   string `json:"auth"`
	} `json:"keys"`
}

// message is one push to make.
type message struct {
	data     []byte
	encoding string // aes128gcm or aesgcm; used only with data
	ttl      int64
	topic    string
	urgency  string
	signer   *pushcrypto.VAPIDSigner // nil: no Authorization header
	receipt  string                  // Push-Receipt: a receipt subscription's URL, or ""
}

// sendFlags are the flags send and smoke share.
type sendFlags struct {
	data, dataFile, encoding, topic, urgency string
	vapidPrivate, subject                    string
	ttl                                      int64
	timeout                                  time.Duration
}

func (f *sendFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.data, "data", "", "message text to encrypt and send (none: a push without payload)")
	fs.StringVar(&f.dataFile, "data-file", "", "read the message from this file instead")
	fs.StringVar(&f.encoding, "encoding", "aes128gcm", "content encoding: aes128gcm (RFC 8291) or aesgcm (legacy draft)")
	fs.Int64Var(&f.ttl, "ttl", 60, "TTL header, seconds (0: deliver now or drop)")
	fs.StringVar(&f.topic, "topic", "", "Topic header (a newer push with the same topic replaces a stored one)")
	fs.StringVar(&f.urgency, "urgency", "", "Urgency header: very-low, low, normal or high")
	fs.StringVar(&f.vapidPrivate, "vapid-private", os.Getenv("PUSHSEND_VAPID_PRIVATE"),
		"VAPID private key, base64url (pushsend keys; env PUSHSEND_VAPID_PRIVATE); none: no Authorization header")
	fs.StringVar(&f.subject, "subject", "", "VAPID sub claim, mailto: or https: URL (none: left out)")
	fs.DurationVar(&f.timeout, "timeout", 10*time.Second, "give up after this long")
}

// message builds the push the flags describe.
func (f *sendFlags) message() (message, error) {
	m := message{encoding: f.encoding, ttl: f.ttl, topic: f.topic, urgency: f.urgency}
	switch {
	case f.data != "" && f.dataFile != "":
		return m, usageErr("-data and -data-file are exclusive")
	case f.dataFile != "":
		b, err := os.ReadFile(f.dataFile)
		if err != nil {
			return m, err
		}
		m.data = b
	default:
		m.data = []byte(f.data)
	}
	if f.encoding != "aes128gcm" && f.encoding != "aesgcm" {
		return m, usageErr("-encoding must be aes128gcm or aesgcm")
	}
	if f.vapidPrivate != "" {
		s, err := pushcrypto.ParseVAPIDSigner(f.vapidPrivate, f.subject)
		if err != nil {
			return m, usageErr("-vapid-private: %v", err)
		}
		m.signer = s
	}
	return m, nil
}

func runSend(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("pushsend send", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f sendFlags
	f.register(fs)
	subArg := fs.String("sub", "", `the subscription JSON ({"endpoint":...,"keys":{"p256dh":...,"auth":...}}), @FILE, or - for stdin`)
	endpoint := fs.String("endpoint", "", "push endpoint URL (instead of -sub)")
	p256dh := fs.String("p256dh", "", "the subscription's p256dh key, base64url (instead of -sub)")
	auth := fs.String("auth", "", "the subscription's auth secret, base64url (instead of -sub)")
	asJSON := fs.Bool("json", false, "print the response as JSON")
	withReceipt := fs.Bool("receipt", false, "ask for a delivery receipt (needs -vapid-private and receipts on the server) and wait for it")
	receiptWait := fs.Duration("receipt-wait", 5*time.Minute, "with -receipt, how long to wait for the receipts")
	count := fs.Int("count", 1, "send this many pushes (the same message) and print a summary instead of each answer")
	fs.Usage = func() {
		fmt.Fprint(stderr, `usage: pushsend send (-sub SUBSCRIPTION | -endpoint URL [-p256dh KEY -auth SECRET]) [flags]

Encrypts the message for the subscription, signs the request with VAPID
when -vapid-private is given (a v2 endpoint, made for a subscription with
an applicationServerKey, needs that key's private half), POSTs it to the
endpoint and prints the status, the headers and the body of the answer.
A message needs the subscription's keys; a push without -data needs none.
Exit status 0 when the push service answered 2xx (201 Created: accepted).
With -receipt it first creates a receipt subscription at the endpoint's
origin (POST /receipts, RFC 8030 receipts), sends with Push-Receipt, then
waits for the push's receipt and prints it: exit status 0 only when it
says delivered (acked by the user agent) or bridge_transmitted (handed
to FCM or APNs).
With -count N it sends N pushes, one after the other, and prints how many
were accepted and refused (by status) and, with -receipt, what their
receipts say (delivered, or not delivered by state and reason): exit
status 0 when every one was accepted (and, with -receipt, delivered).
TLS trusts the system's CA file, or the one SSL_CERT_FILE names instead
(make run's development CA: data/tls/ca.pem).

Flags:
`)
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	sub, err := readSubscription(*subArg, os.Stdin)
	if err != nil {
		return err
	}
	if *endpoint != "" {
		sub.Endpoint = *endpoint
	}
	if *p256dh != "" {
		sub.Keys.P256DH = *p256dh
	}
	if *auth != "" {
		sub.Keys.Auth = *auth
	}
	if sub.Endpoint == "" {
		fs.Usage()
		return usageErr("-sub or -endpoint is required")
	}
	if *count < 1 {
		return usageErr("-count must be at least 1")
	}
	m, err := f.message()
	if err != nil {
		return err
	}
	var rs *receiptSub
	if *withReceipt {
		if rs, err = newReceipts(sub.Endpoint, m.signer); err != nil {
			return err
		}
	}
	sctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	if rs != nil {
		if err := rs.subscribe(sctx); err != nil {
			return err
		}
		m.receipt = rs.sub
	}
	if *count > 1 {
		return sendMany(ctx, sub, m, *count, f.timeout, rs, *receiptWait, *asJSON, stdout)
	}
	resp, err := push(sctx, sub, m)
	if err != nil {
		return err
	}
	resp.print(stdout, *asJSON)
	if err := resp.err(); err != nil || rs == nil {
		return err
	}
	wctx, wcancel := context.WithTimeout(ctx, *receiptWait)
	defer wcancel()
	rc, err := rs.await(wctx, resp.Header.Get("Location"))
	if err != nil {
		return err
	}
	rc.print(stdout, *asJSON)
	return rc.err()
}

// readSubscription reads -sub: inline JSON, @file, or - (stdin).
func readSubscription(arg string, stdin io.Reader) (subscription, error) {
	var sub subscription
	var b []byte
	var err error
	switch {
	case arg == "":
		return sub, nil
	case arg == "-":
		b, err = io.ReadAll(stdin)
	case strings.HasPrefix(arg, "@"):
		b, err = os.ReadFile(arg[1:])
	default:
		b = []byte(arg)
	}
	if err != nil {
		return sub, err
	}
	if err := json.Unmarshal(b, &sub); err != nil {
		return sub, usageErr("-sub is not a subscription's JSON: %v", err)
	}
	return sub, nil
}

// newRequest builds the push request: the encrypted body with its
// headers, TTL, Topic, Urgency and the VAPID Authorization.
func newRequest(ctx context.Context, sub subscription, m message, now time.Time) (*http.Request, error) {
	u, err := url.Parse(sub.Endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, usageErr("endpoint %q is not an http(s) URL", sub.Endpoint)
	}
	hdr := http.Header{}
	var body []byte
	if len(m.data) > 0 {
		ua, err := decodeB64(sub.Keys.P256DH)
		if err != nil || len(ua) != vapid.KeyLen {
			return nil, usageErr("the subscription's p256dh key is not base64 of a 65-byte P-256 point")
		}
		secret, err := decodeB64(sub.Keys.Auth)
		if err != nil || len(secret) != pushcrypto.AuthSecretLen {
			return nil, usageErr("the subscription's auth secret is not base64 of 16 bytes")
		}
		switch m.encoding {
		case "aes128gcm":
			body, err = pushcrypto.EncryptAES128GCM(m.data, ua, secret)
		case "aesgcm":
			var salt, dh []byte
			body, salt, dh, err = pushcrypto.EncryptAESGCM(m.data, ua, secret)
			hdr.Set("Encryption", "salt="+base64.RawURLEncoding.EncodeToString(salt))
			hdr.Set("Crypto-Key", "dh="+base64.RawURLEncoding.EncodeToString(dh))
		}
		if err != nil {
			return nil, fmt.Errorf("encrypt: %w", err)
		}
		hdr.Set("Content-Encoding", m.encoding)
		hdr.Set("Content-Type", "application/octet-stream")
	}
	hdr.Set("TTL", strconv.FormatInt(m.ttl, 10))
	if m.topic != "" {
		hdr.Set("Topic", m.topic)
	}
	if m.urgency != "" {
		hdr.Set("Urgency", m.urgency)
	}
	if m.receipt != "" {
		hdr.Set("Push-Receipt", m.receipt)
	}
	if m.signer != nil {
		auth, err := vapidAuthorization(m.signer, strings.ToLower(u.Scheme+"://"+u.Host), now)
		if err != nil {
			return nil, err
		}
		hdr.Set("Authorization", auth)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, sub.Endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header = hdr
	return req, nil
}

// vapidAuthorization is signer's Authorization header for origin: RFC
// 8292 §2, aud the push resource's origin, exp at most 24 h (12 here).
func vapidAuthorization(signer *pushcrypto.VAPIDSigner, origin string, now time.Time) (string, error) {
	tok, err := signer.Token(origin, now.Add(12*time.Hour))
	if err != nil {
		return "", err
	}
	return signer.Authorization(tok), nil
}

// decodeB64 reads base64 in either alphabet, padded or not, as keys
// appear in subscriptions.
func decodeB64(s string) ([]byte, error) {
	s = strings.TrimRight(s, "=")
	if strings.ContainsAny(s, "+/") {
		return base64.RawStdEncoding.DecodeString(s)
	}
	return base64.RawURLEncoding.DecodeString(s)
}

// response is the push service's answer.
type response struct {
	Status  int
	Header  http.Header
	Body    []byte
	Elapsed time.Duration
}

func push(ctx context.Context, sub subscription, m message) (*response, error) {
	req, err := newRequest(ctx, sub, m, time.Now())
	if err != nil {
		return nil, err
	}
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	return &response{Status: resp.StatusCode, Header: resp.Header, Body: b, Elapsed: time.Since(start)}, nil
}

// err is nil for a 2xx answer.
func (r *response) err() error {
	if r.Status/100 == 2 {
		return nil
	}
	return fmt.Errorf("push not accepted: %d %s", r.Status, http.StatusText(r.Status))
}

func (r *response) print(w io.Writer, asJSON bool) {
	if asJSON {
		out := map[string]any{"status": r.Status, "elapsed_ms": float64(r.Elapsed.Microseconds()) / 1000}
		h := map[string]string{}
		for k := range r.Header {
			h[k] = r.Header.Get(k)
		}
		out["headers"] = h
		if json.Valid(r.Body) && len(r.Body) > 0 {
			out["body"] = json.RawMessage(r.Body)
		} else {
			out["body"] = string(r.Body)
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.Encode(out)
		return
	}
	fmt.Fprintf(w, "%d %s (%.1f ms)\n", r.Status, http.StatusText(r.Status), float64(r.Elapsed.Microseconds())/1000)
	names := make([]string, 0, len(r.Header))
	for k := range r.Header {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		for _, v := range r.Header[k] {
			fmt.Fprintf(w, "%s: %s\n", k, v)
		}
	}
	if len(r.Body) > 0 {
		fmt.Fprintf(w, "\n%s\n", bytes.TrimSpace(r.Body))
	}
}

// summary is what send -count prints: the answers by status, and with
// -receipt the receipts by outcome.
type summary struct {
	Pushes       int            `json:"pushes"`
	Accepted     int            `json:"accepted"`
	Refused      map[string]int `json:"refused,omitempty"` // by status line
	Delivered    int            `json:"delivered,omitempty"`
	NotDelivered map[string]int `json:"not_delivered,omitempty"` // by state, and reason
	Missing      int            `json:"receipts_missing,omitempty"`
}

// sendMany sends count pushes and summarises them; see runSend.
func sendMany(ctx context.Context, sub subscription, m message, count int, timeout time.Duration,
	rs *receiptSub, receiptWait time.Duration, asJSON bool, stdout io.Writer) error {
	sum := summary{Pushes: count, Refused: map[string]int{}, NotDelivered: map[string]int{}}
	var locations []string
	for range count {
		pctx, cancel := context.WithTimeout(ctx, timeout)
		resp, err := push(pctx, sub, m)
		cancel()
		switch {
		case err != nil:
			sum.Refused[err.Error()]++
		case resp.err() != nil:
			sum.Refused[fmt.Sprintf("%d %s", resp.Status, http.StatusText(resp.Status))]++
		default:
			sum.Accepted++
			locations = append(locations, resp.Header.Get("Location"))
		}
	}
	var waitErr error
	if rs != nil && len(locations) > 0 {
		wctx, cancel := context.WithTimeout(ctx, receiptWait)
		got, err := rs.awaitAll(wctx, locations)
		cancel()
		waitErr = err
		sum.Missing = len(locations) - len(got)
		for _, rc := range got {
			if rc.err() == nil {
				sum.Delivered++
				continue
			}
			what := rc.State
			if rc.Reason != "" {
				what += " (" + rc.Reason + ")"
			}
			sum.NotDelivered[what]++
		}
	}
	sum.print(stdout, rs != nil, asJSON)
	switch {
	case sum.Accepted < count:
		return fmt.Errorf("%d of %d pushes refused", count-sum.Accepted, count)
	case waitErr != nil:
		return waitErr
	case rs != nil && sum.Delivered < count:
		return fmt.Errorf("%d of %d pushes not delivered", count-sum.Delivered, count)
	}
	return nil
}

func (s summary) print(w io.Writer, receipts, asJSON bool) {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.Encode(s)
		return
	}
	fmt.Fprintf(w, "%d pushes: %d accepted, %d refused%s\n", s.Pushes, s.Accepted, s.Pushes-s.Accepted, counts(s.Refused))
	if receipts {
		fmt.Fprintf(w, "receipts: %d delivered, %d not delivered%s", s.Delivered, s.Accepted-s.Delivered-s.Missing, counts(s.NotDelivered))
		if s.Missing > 0 {
			fmt.Fprintf(w, ", %d not received", s.Missing)
		}
		fmt.Fprintln(w)
	}
}

// counts is ": a 2, b 1" for a map of counts, largest first ("" when
// empty).
func counts(m map[string]int) string {
	keys := slices.Collect(maps.Keys(m))
	slices.SortFunc(keys, func(a, b string) int { return cmp.Or(m[b]-m[a], strings.Compare(a, b)) })
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	if len(parts) == 0 {
		return ""
	}
	return ": " + strings.Join(parts, ", ")
}
