package receipts

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/autopush-go/autopush/internal/receiptwire"
	"github.com/autopush-go/autopush/storage"
)

// Webhooks: a receipt subscription created with {"webhook": URL} has its
// receipts POSTed there too, by every endpoint node's dispatcher: each
// WebhookInterval it lists the subscriptions with a webhook
// (storage.ReceiptHooks), reads each one's unacknowledged receipts and
// POSTs them, {"receipts": [...]} as the GET returns them, signed with
// the subscription's secret:
//
//	Webhook-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>." + body)>
//
// A 2xx answer acknowledges them. Anything else, or no answer within
// WebhookTimeout, is tried again after a backoff that doubles from
// WebhookBackoff to WebhookBackoffMax, per subscription; receipts wait
// for it (kept storage.ReceiptKeep). Delivery is at least once: with
// several endpoint nodes, or a 2xx that is lost, a receipt can come
// twice, so receivers deduplicate by id.
//
// POSTs run on WebhookWorkers goroutines, one subscription each at a
// time, so a webhook that answers slowly (or never) holds one worker
// for at most WebhookTimeout, and the others' receipts keep flowing.
//
// The push service calls a URL an application server chose: by default
// only https URLs whose host resolves to a public address are called
// (notPublic, public.go: checked at connection time, so a name that
// resolves to a private address later is refused too; an address in the
// URL is refused when the subscription is created). WebhookInsecure lifts
// both, for tests and private deployments.

// Defaults of the webhook settings left zero in Config.
const (
	DefaultWebhookTimeout    = 10 * time.Second
	DefaultWebhookWorkers    = 16
	DefaultWebhookBackoff    = time.Second
	DefaultWebhookBackoffMax = 5 * time.Minute
	// DefaultWebhooksPerKey is receipt-webhooks-per-key's default: one
	// subscription takes any number of pushes' receipts, so an
	// application server needs one per place it receives them.
	DefaultWebhooksPerKey = 20
)

const (
	hookPage  = 100 // subscriptions listed per storage call
	hookBatch = 100 // receipts per POST
	// SignatureHeader carries a webhook POST's signature.
	SignatureHeader = "Webhook-Signature"
)

// Sign is the Webhook-Signature of body sent at t with secret.
func Sign(secret string, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(ts + "."))
	m.Write(body)
	return "t=" + ts + ",v1=" + hex.EncodeToString(m.Sum(nil))
}

var errNotPublic = errors.New("webhook address is not public")

// hookClient calls webhooks: bounded, no redirects (a redirect could
// lead anywhere), public addresses only unless insecure.
func hookClient(insecure bool, timeout time.Duration) *http.Client {
	d := &net.Dialer{Timeout: timeout}
	if !insecure {
		d.Control = dialPublic
	}
	return &http.Client{
		Timeout:       timeout,
		Transport:     &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 4, IdleConnTimeout: time.Minute},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// dialPublic is the dialer's check of each address it is about to
// connect to, whatever name it came from.
func dialPublic(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return err
	}
	if why := notPublic(ap.Addr()); why != "" {
		return fmt.Errorf("%w: %s", errNotPublic, why)
	}
	return nil
}

// WebhookRest is the grammar of what follows a webhook's scheme and
// its ':': RFC 3986's "//" authority, path, query and fragment, narrowed
// to what net/url reads as written: a host name or IPv4 address without
// percent-encoding (which net/url refuses in a host), or an IPv6 literal;
// a port; no credentials; percent-encoding elsewhere complete. So a
// webhook is taken exactly when docs/openapi.yaml's schema takes it
// (its pattern is "^https:" and this one's body, a test checks), and
// never read differently than the client wrote it.
const WebhookRest = `//([A-Za-z0-9._~!$&'()*+,;=-]+|\[[0-9A-Fa-f:.]+\])(:[0-9]*)?` +
	`(/([A-Za-z0-9._~!$&'()*+,;=:@/-]|%[0-9A-Fa-f]{2})*)?` +
	`(\?([A-Za-z0-9._~!$&'()*+,;=:@/?-]|%[0-9A-Fa-f]{2})*)?` +
	`(#([A-Za-z0-9._~!$&'()*+,;=:@/?-]|%[0-9A-Fa-f]{2})*)?`

var webhookRest = regexp.MustCompile("^" + WebhookRest + "$")

// checkWebhook refuses a webhook URL the dispatcher would not call: with
// webhooks off, one not of WebhookRest's grammar (nor an IPv6 literal
// net/url takes), and a scheme but https (or http with WebhookInsecure;
// schemes compare as written).
func (a *API) checkWebhook(raw string) error {
	scheme, rest, _ := strings.Cut(raw, ":")
	switch {
	case !a.cfg.Webhooks:
		return errors.New("webhooks are off on this push service")
	case len(raw) > storage.MaxWebhookLen || !webhookRest.MatchString(rest):
		return errors.New("the webhook is not an absolute URL without credentials")
	case scheme != "https" && !(a.cfg.WebhookInsecure && scheme == "http"):
		return errors.New("the webhook must be an https URL")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return errors.New("the webhook is not an absolute URL without credentials")
	}
	// A name is resolved when it is called (the dialer checks every
	// address then); an address is checked now too.
	if ip, err := netip.ParseAddr(u.Hostname()); err == nil && !a.cfg.WebhookInsecure {
		if why := notPublic(ip); why != "" {
			return fmt.Errorf("the webhook's address is not public: %s", why)
		}
	}
	return nil
}

// newSecret is a webhook's signing secret.
func newSecret() string {
	var b [32]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// dispatcher POSTs the receipts of subscriptions with a webhook.
type dispatcher struct {
	a      *API
	cfg    Config // with the webhook defaults filled in
	client *http.Client
	mu     sync.Mutex
	wait   map[storage.ReceiptSubID]backoff // subscriptions whose last POST failed
	busy   map[storage.ReceiptSubID]bool    // subscriptions with a POST in flight
	slots  chan struct{}                    // one per worker
	posts  sync.WaitGroup
	// ctx ends with Stop: POSTs in flight are abandoned, their receipts
	// left unacknowledged for the next node or start.
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
}

type backoff struct {
	until time.Time
	delay time.Duration
}

// withHookDefaults fills the webhook settings left zero.
func (c Config) withHookDefaults() Config {
	if c.WebhookTimeout <= 0 {
		c.WebhookTimeout = DefaultWebhookTimeout
	}
	if c.WebhookWorkers <= 0 {
		c.WebhookWorkers = DefaultWebhookWorkers
	}
	if c.WebhookBackoff <= 0 {
		c.WebhookBackoff = DefaultWebhookBackoff
	}
	if c.WebhookBackoffMax <= 0 {
		c.WebhookBackoffMax = DefaultWebhookBackoffMax
	}
	c.WebhookBackoffMax = max(c.WebhookBackoffMax, c.WebhookBackoff)
	return c
}

// Start runs the webhook dispatcher when webhooks are on; Stop ends it.
func (a *API) Start() {
	if !a.cfg.Enabled || !a.cfg.Webhooks {
		return
	}
	cfg := a.cfg.withHookDefaults()
	client := hookClient(cfg.WebhookInsecure, cfg.WebhookTimeout)
	if a.wrapHooks != nil {
		client.Transport = a.wrapHooks(client.Transport)
	}
	d := &dispatcher{a: a, cfg: cfg, client: client,
		wait: map[storage.ReceiptSubID]backoff{}, busy: map[storage.ReceiptSubID]bool{},
		slots: make(chan struct{}, cfg.WebhookWorkers), done: make(chan struct{})}
	d.ctx, d.cancel = context.WithCancel(context.Background())
	a.hooks = d
	go d.run()
}

// Stop ends the dispatcher: POSTs in flight are cut off (their receipts
// stay unacknowledged) and waited for.
func (a *API) Stop() {
	if a.hooks != nil {
		a.hooks.cancel()
		<-a.hooks.done
		a.hooks = nil
	}
}

func (d *dispatcher) run() {
	defer close(d.done)
	defer d.posts.Wait()
	tick := time.NewTicker(d.cfg.WebhookInterval)
	defer tick.Stop()
	for {
		select {
		case <-d.ctx.Done():
			return
		case <-tick.C:
		}
		d.round()
	}
}

// round goes once through every subscription with a webhook, handing
// each one not in flight or backing off to a free worker.
func (d *dispatcher) round() {
	var after storage.ReceiptSubID
	for {
		var subs []storage.ReceiptSub
		ctx, cancel := context.WithTimeout(d.ctx, d.cfg.StorageTimeout)
		err := d.a.host.Timed(func() (err error) {
			subs, err = d.a.store.ReceiptHooks(ctx, after, hookPage)
			return err
		})
		cancel()
		if err != nil {
			if d.ctx.Err() == nil {
				d.a.log.Warn("receipt webhooks: list subscriptions", "error", err)
			}
			return
		}
		for i := range subs {
			if !d.claim(subs[i].ID) {
				continue
			}
			select {
			case <-d.ctx.Done():
				d.release(&subs[i], nil)
				return
			case d.slots <- struct{}{}:
			}
			d.posts.Add(1)
			go func(sub storage.ReceiptSub) {
				defer d.posts.Done()
				err := d.post(&sub)
				<-d.slots
				d.release(&sub, err)
			}(subs[i])
		}
		if len(subs) < hookPage {
			return
		}
		after = subs[len(subs)-1].ID
	}
}

// claim marks sub in flight unless it already is or is backing off.
func (d *dispatcher) claim(sub storage.ReceiptSubID) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if b, waiting := d.wait[sub]; d.busy[sub] || waiting && time.Now().Before(b.until) {
		return false
	}
	d.busy[sub] = true
	return true
}

// release ends sub's POST: err starts or lengthens its backoff, success
// clears it.
func (d *dispatcher) release(sub *storage.ReceiptSub, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.busy, sub.ID)
	if err == nil {
		delete(d.wait, sub.ID)
		return
	}
	if d.ctx.Err() != nil {
		return // cut off by Stop: not the webhook's failure
	}
	b := d.wait[sub.ID]
	b.delay = min(max(2*b.delay, d.cfg.WebhookBackoff), d.cfg.WebhookBackoffMax)
	b.until = time.Now().Add(b.delay)
	d.wait[sub.ID] = b
	d.a.hookFailed.Inc()
	d.a.log.Info("receipt webhook failed; tried again later", "webhook", sub.Webhook, "in", b.delay, "error", err)
}

// post sends one batch of sub's receipts and acknowledges them on a 2xx.
func (d *dispatcher) post(sub *storage.ReceiptSub) error {
	var got []storage.Receipt
	ctx, cancel := context.WithTimeout(d.ctx, d.cfg.StorageTimeout)
	err := d.a.host.Timed(func() (err error) {
		got, err = d.a.store.Receipts(ctx, sub.ID, hookBatch)
		return err
	})
	cancel()
	if err != nil || len(got) == 0 {
		return err
	}
	body, _ := json.Marshal(receiptwire.List{Receipts: d.a.receiptsJSON(got)})
	req, err := http.NewRequestWithContext(d.ctx, http.MethodPost, sub.Webhook, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(SignatureHeader, Sign(sub.WebhookSecret, time.Now(), body))
	resp, err := d.client.Do(req)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("webhook answered %d", resp.StatusCode)
	}
	ids := make([]string, len(got))
	for i := range got {
		ids[i] = got[i].ID
	}
	// Acknowledged even when Stop came meanwhile: the webhook took them.
	ctx, cancel = context.WithTimeout(context.Background(), d.cfg.StorageTimeout)
	defer cancel()
	if err := d.a.host.Timed(func() error { return d.a.store.AckReceipts(ctx, sub.ID, ids) }); err != nil {
		return fmt.Errorf("acknowledge after the webhook took them: %w", err)
	}
	d.a.hooked.Add(len(got))
	return nil
}
