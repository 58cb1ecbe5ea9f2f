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
	"strconv"
	"sync"
	"syscall"
	"time"

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
// hookTimeout, is tried again after a backoff that doubles from
// hookBackoff to hookBackoffMax, per subscription; receipts wait for it
// (kept storage.ReceiptKeep). Delivery is at least once: with several
// endpoint nodes, or a 2xx that is lost, a receipt can come twice, so
// receivers deduplicate by id.
//
// The push service calls a URL an application server chose: by default
// only https URLs whose host resolves to a public address are called
// (checked at connection time, so a name that resolves to a private
// address later is refused too). WebhookInsecure lifts both, for tests
// and private deployments.

const (
	hookTimeout    = 10 * time.Second
	hookBackoff    = time.Second
	hookBackoffMax = 5 * time.Minute
	hookPage       = 100 // subscriptions listed per storage call
	hookBatch      = 100 // receipts per POST
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
func hookClient(insecure bool) *http.Client {
	d := &net.Dialer{Timeout: hookTimeout}
	if !insecure {
		d.Control = func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return err
			}
			if a := ap.Addr().Unmap(); !a.IsGlobalUnicast() || a.IsPrivate() {
				return fmt.Errorf("%w: %s", errNotPublic, a)
			}
			return nil
		}
	}
	return &http.Client{
		Timeout:       hookTimeout,
		Transport:     &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 4, IdleConnTimeout: time.Minute},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// checkWebhook refuses a webhook URL the dispatcher would not call.
func (a *API) checkWebhook(raw string) error {
	u, err := url.Parse(raw)
	switch {
	case !a.cfg.Webhooks:
		return errors.New("webhooks are off on this push service")
	case err != nil || u.Host == "" || u.User != nil || len(raw) > storage.MaxWebhookLen:
		return errors.New("the webhook is not an absolute URL without credentials")
	case u.Scheme != "https" && !(a.cfg.WebhookInsecure && u.Scheme == "http"):
		return errors.New("the webhook must be an https URL")
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
	client *http.Client
	mu     sync.Mutex
	wait   map[storage.ReceiptSubID]backoff // subscriptions whose last POST failed
	stop   chan struct{}
	done   chan struct{}
}

type backoff struct {
	until time.Time
	delay time.Duration
}

// Start runs the webhook dispatcher when webhooks are on; Stop ends it.
func (a *API) Start() {
	if !a.cfg.Enabled || !a.cfg.Webhooks {
		return
	}
	d := &dispatcher{a: a, client: hookClient(a.cfg.WebhookInsecure), wait: map[storage.ReceiptSubID]backoff{},
		stop: make(chan struct{}), done: make(chan struct{})}
	a.hooks = d
	go d.run()
}

// Stop ends the dispatcher, waiting for its POSTs in flight.
func (a *API) Stop() {
	if a.hooks != nil {
		close(a.hooks.stop)
		<-a.hooks.done
		a.hooks = nil
	}
}

func (d *dispatcher) run() {
	defer close(d.done)
	tick := time.NewTicker(d.a.cfg.WebhookInterval)
	defer tick.Stop()
	for {
		select {
		case <-d.stop:
			return
		case <-tick.C:
		}
		d.round()
	}
}

// round goes once through every subscription with a webhook.
func (d *dispatcher) round() {
	var after storage.ReceiptSubID
	for {
		var subs []storage.ReceiptSub
		ctx, cancel := context.WithTimeout(context.Background(), d.a.cfg.StorageTimeout)
		err := d.a.node.Timed(func() (err error) {
			subs, err = d.a.store.ReceiptHooks(ctx, after, hookPage)
			return err
		})
		cancel()
		if err != nil {
			d.a.log.Warn("receipt webhooks: list subscriptions", "error", err)
			return
		}
		for i := range subs {
			select {
			case <-d.stop:
				return
			default:
			}
			d.deliver(&subs[i])
		}
		if len(subs) < hookPage {
			return
		}
		after = subs[len(subs)-1].ID
	}
}

// deliver POSTs sub's receipts, unless it is backing off.
func (d *dispatcher) deliver(sub *storage.ReceiptSub) {
	d.mu.Lock()
	b, waiting := d.wait[sub.ID]
	d.mu.Unlock()
	if waiting && time.Now().Before(b.until) {
		return
	}
	err := d.post(sub)
	d.mu.Lock()
	defer d.mu.Unlock()
	if err == nil {
		delete(d.wait, sub.ID)
		return
	}
	b.delay = min(max(2*b.delay, hookBackoff), hookBackoffMax)
	b.until = time.Now().Add(b.delay)
	d.wait[sub.ID] = b
	d.a.hookFailed.Inc()
	d.a.log.Info("receipt webhook failed; tried again later", "webhook", sub.Webhook, "in", b.delay, "error", err)
}

// post sends one batch of sub's receipts and acknowledges them on a 2xx.
func (d *dispatcher) post(sub *storage.ReceiptSub) error {
	var got []storage.Receipt
	ctx, cancel := context.WithTimeout(context.Background(), d.a.cfg.StorageTimeout)
	err := d.a.node.Timed(func() (err error) {
		got, err = d.a.store.Receipts(ctx, sub.ID, hookBatch)
		return err
	})
	cancel()
	if err != nil || len(got) == 0 {
		return err
	}
	body, _ := json.Marshal(struct {
		Receipts []Receipt `json:"receipts"`
	}{d.a.receiptsJSON(got)})
	req, err := http.NewRequest(http.MethodPost, sub.Webhook, bytes.NewReader(body))
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
	ctx, cancel = context.WithTimeout(context.Background(), d.a.cfg.StorageTimeout)
	defer cancel()
	if err := d.a.node.Timed(func() error { return d.a.store.AckReceipts(ctx, sub.ID, ids) }); err != nil {
		return fmt.Errorf("acknowledge after the webhook took them: %w", err)
	}
	d.a.hooked.Add(len(got))
	return nil
}
