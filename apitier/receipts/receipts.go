package receipts

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/cloudwego/hertz/pkg/app"

	"github.com/autopush-go/autopush/apitier/httpapi"
	"github.com/autopush-go/autopush/internal/errno"
	"github.com/autopush-go/autopush/internal/receiptwire"
	"github.com/autopush-go/autopush/storage"
)

// Rel is the RFC 8030 link relation of the receipt subscribe resource.
const Rel = "urn:ietf:params:push:receipt"

// Bounds of the routes.
const (
	pageDefault = 100  // receipts a GET returns without ?limit
	pageMax     = 1000 // and at most
	ackMax      = 1000 // ids one acknowledgement names
	// AckBody is the largest acknowledgement body: a thousand ids of
	// maxReceiptID bytes, quoted and separated ("id", ) with room to spare.
	AckBody = 72 << 10
	// maxReceiptID: a receipt id is 1 to 64 bytes of the url-safe
	// base64 alphabet (storage.Receipt's ID).
	maxReceiptID = 64
	// subscribeBody bounds POST /receipts' body: a webhook URL.
	subscribeBody = 4 << 10
	// pollEvery: a waiting GET reads storage again this often. Receipts
	// are written by whichever node settles a message; storage is where
	// they meet.
	pollEvery = 100 * time.Millisecond
	maxWait   = time.Hour // ?wait= beyond is refused
)

// Store is what the routes read and write.
type Store interface {
	PutReceiptSub(ctx context.Context, sub storage.ReceiptSub) error
	GetReceiptSub(ctx context.Context, id storage.ReceiptSubID) (storage.ReceiptSub, error)
	Receipts(ctx context.Context, sub storage.ReceiptSubID, limit int) ([]storage.Receipt, error)
	AckReceipts(ctx context.Context, sub storage.ReceiptSubID, ids []string) error
	ReceiptHooks(ctx context.Context, after storage.ReceiptSubID, limit int) ([]storage.ReceiptSub, error)
	CountReceiptHooks(ctx context.Context, key [32]byte, limit int) (int, error)
}

// Host is what the routes use of the endpoint node that serves them.
type Host interface {
	// VAPIDKey verifies the request's VAPID Authorization and returns
	// the sha256 of its public key, or the 401 to answer.
	VAPIDKey(c *app.RequestContext) ([32]byte, *errno.HTTPError)
	// Timed runs one storage call, timed and counted in the node's
	// storage metrics.
	Timed(call func() error) error
	// StorageError logs a failed storage call and is its answer.
	StorageError(op string, err error) *errno.HTTPError
	// Draining reports the node is shutting down: waiting GETs answer.
	Draining() bool
}

// Config of the routes: the endpoint node's settings they read.
type Config struct {
	// Enabled is receipts; off, every route answers 404 and Push-Receipt
	// is ignored.
	Enabled bool
	// EndpointURL is endpoint-url: subscriptions are
	// {EndpointURL}/receipts/{id}, pushes' Locations {EndpointURL}/m/{id}.
	EndpointURL string
	// MaxWait is receipt-max-wait, the longest wait of a GET.
	MaxWait time.Duration
	// MaxWaiting is receipt-max-waiting, the GETs waiting at once; one
	// more that would wait is answered 429 with Retry-After. Zero:
	// DefaultMaxWaiting.
	MaxWaiting int
	// StorageTimeout bounds each storage call (storage-timeout).
	StorageTimeout time.Duration
	// Webhooks is receipt-webhooks: subscriptions may name a webhook
	// (webhook.go); WebhookInterval is receipt-webhook-interval, how
	// often each is served; WebhookInsecure is receipt-webhook-insecure,
	// http URLs and private addresses allowed.
	Webhooks        bool
	WebhookInterval time.Duration
	WebhookInsecure bool
	// WebhookTimeout is receipt-webhook-timeout, the longest a POST
	// (connect to answer) may take; WebhookWorkers is
	// receipt-webhook-workers, the POSTs in flight at once. Zero: the
	// Default values (webhook.go).
	WebhookTimeout time.Duration
	WebhookWorkers int
	// WebhookBackoff is the wait after a webhook's first failure,
	// doubled after each further one up to WebhookBackoffMax. Zero: the
	// Default values.
	WebhookBackoff, WebhookBackoffMax time.Duration
	// WebhooksPerKey is receipt-webhooks-per-key: the subscriptions with
	// a webhook one VAPID key may create (0: no limit). Every node calls
	// each of them every WebhookInterval, for ever (a subscription is
	// never deleted), and one serves any number of pushes.
	WebhooksPerKey int
}

// API is the receipt routes. Goroutine-safe.
type API struct {
	cfg                Config
	store              Store
	host               Host
	log                *slog.Logger
	base, loc, link    string
	set                *metrics.Set
	created, read, ack *metrics.Counter
	hooked, hookFailed *metrics.Counter
	hooks              *dispatcher   // nil: webhooks off, or not started
	waiting            chan struct{} // one per GET waiting for a receipt
	owners             owners        // of the subscriptions pushes named
	// wrapHooks, set by tests before Start, wraps the webhook client's
	// transport (to watch its round trips).
	wrapHooks func(http.RoundTripper) http.RoundTripper
}

// mReceipts{result}: subscriptions created, receipts read by GETs (a
// receipt read twice counts twice), acknowledged, POSTed to webhooks
// (and taken), and webhook POSTs that failed.
const mReceipts = "autoendpoint_receipts_total"

// mWaiting: GETs waiting for a receipt (at most MaxWaiting).
const mWaiting = "autoendpoint_receipt_reads_waiting"

// DefaultMaxWaiting is MaxWaiting's default: at most ten storage reads
// a second each, 5,120 a second in all.
const DefaultMaxWaiting = 512

// New makes the routes.
func New(cfg Config, store Store, host Host, log *slog.Logger) *API {
	base := strings.TrimRight(cfg.EndpointURL, "/")
	a := &API{cfg: cfg, store: store, host: host, log: log, base: base + "/receipts", loc: base + "/m/", set: metrics.NewSet()}
	a.link = "<" + a.base + `>; rel="` + Rel + `"`
	a.created = a.set.NewCounter(mReceipts + `{result="subscribed"}`)
	a.read = a.set.NewCounter(mReceipts + `{result="read"}`)
	a.ack = a.set.NewCounter(mReceipts + `{result="acked"}`)
	a.hooked = a.set.NewCounter(mReceipts + `{result="webhook"}`)
	a.hookFailed = a.set.NewCounter(mReceipts + `{result="webhook_failed"}`)
	a.waiting = make(chan struct{}, cmp.Or(max(cfg.MaxWaiting, 0), DefaultMaxWaiting))
	a.set.NewGauge(mWaiting, func() float64 { return float64(len(a.waiting)) })
	return a
}

// Routes lists the routes, in the order the node registers them.
func (a *API) Routes() []httpapi.Route {
	return []httpapi.Route{
		{Method: http.MethodPost, Path: "/receipts", Label: "receipts_subscribe", Handle: a.subscribe},
		{Method: http.MethodGet, Path: "/receipts/:id", Label: "receipts_read", Handle: a.list},
		{Method: http.MethodPost, Path: "/receipts/:id/ack", Label: "receipts_ack", Handle: a.acknowledge},
	}
}

// Serves reports whether a request URI is one of the routes with a body
// (the node sizes its read-ahead by route: AckBody).
func Serves(uri []byte) bool { return strings.HasPrefix(string(uri), "/receipts/") }

// Enabled reports receipts on.
func (a *API) Enabled() bool { return a.cfg.Enabled }

// Link is the Link header of a push's answer: the receipt subscribe
// resource ("" with receipts off).
func (a *API) Link() string {
	if !a.cfg.Enabled {
		return ""
	}
	return a.link
}

// WriteMetrics writes the API's series (the node's /metrics serves them).
func (a *API) WriteMetrics(w io.Writer) { a.set.WritePrometheus(w) }

var (
	errOff             = errno.Unnumbered(http.StatusNotFound, "delivery receipts are not served here")
	errNoSub           = errno.Unnumbered(http.StatusNotFound, "no receipt subscription of this VAPID key has this id")
	errPushReceipt     = errno.Unnumbered(http.StatusBadRequest, "Push-Receipt names no receipt subscription of this push's VAPID key")
	errPushReceiptAuth = errno.InvalidAuth.HTTPError("Push-Receipt needs a VAPID Authorization")
	errBusy            = errno.Unnumbered(http.StatusTooManyRequests, "too many receipt reads are waiting on this node: read again after Retry-After")
	errQuery           = errno.Unnumbered(http.StatusBadRequest, "wait must be whole seconds, 0 to 3600, and limit 1 to 1000")
	errAck             = errno.Unnumbered(http.StatusBadRequest, `the body must be {"ids": [...]} with 1 to 1000 receipt ids`)
	errSubscribeBody   = errno.Unnumbered(http.StatusBadRequest, `the body must be empty or {"webhook": "<https URL>"}`)
)

// tooManyHooks is the 403 of a key at receipt-webhooks-per-key: a
// subscription is never deleted, so waiting frees nothing (not a 429).
func tooManyHooks(limit int) *errno.HTTPError {
	return errno.Unnumbered(http.StatusForbidden, "this VAPID key has "+strconv.Itoa(limit)+
		" receipt subscriptions with a webhook, the most allowed (receipt-webhooks-per-key): "+
		"name one of them in Push-Receipt, it takes the receipts of any number of pushes")
}

// URL is the URL of subscription id.
func (a *API) URL(id storage.ReceiptSubID) string {
	return a.base + "/" + base64.RawURLEncoding.EncodeToString(id[:])
}

// parseID reads a subscription id: the last path segment of its URL (a
// Push-Receipt) or the route's parameter.
func parseID(v string) (storage.ReceiptSubID, bool) {
	if i := strings.LastIndexByte(v, '/'); i >= 0 {
		v = v[i+1:]
	}
	var id storage.ReceiptSubID
	if len(v) != base64.RawURLEncoding.EncodedLen(len(id)) {
		return id, false
	}
	n, err := base64.RawURLEncoding.Decode(id[:], []byte(v))
	return id, err == nil && n == len(id)
}

// own checks subscription id exists and is key's; another key's reads as
// missing, so ids reveal nothing to other keys.
func (a *API) own(ctx context.Context, id storage.ReceiptSubID, key [32]byte) *errno.HTTPError {
	owner, known := a.owners.get(id)
	if !known {
		var sub storage.ReceiptSub
		missing := false
		err := a.host.Timed(func() (err error) {
			sub, err = a.store.GetReceiptSub(ctx, id)
			if errors.Is(err, storage.ErrNotFound) {
				missing = true
				return nil // an answer, not a storage failure
			}
			return err
		})
		switch {
		case err != nil:
			return a.host.StorageError("read receipt subscription", err)
		case missing:
			return errNoSub
		}
		owner = sub.KeyHash
		a.owners.put(id, owner)
	}
	if owner != key {
		return errNoSub
	}
	return nil
}

// ownersMax bounds the owners cache: ~100 bytes an entry.
const ownersMax = 1 << 14

// owners caches the VAPID key (sha256) that owns each receipt
// subscription a push named: a subscription is never deleted and its key
// never changes, so an entry is never wrong, and a push naming a known
// subscription costs no storage read. When full, an arbitrary entry goes.
type owners struct {
	mu sync.Mutex
	m  map[storage.ReceiptSubID][32]byte
}

func (o *owners) get(id storage.ReceiptSubID) ([32]byte, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	k, ok := o.m[id]
	return k, ok
}

func (o *owners) put(id storage.ReceiptSubID, key [32]byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.m == nil {
		o.m = map[storage.ReceiptSubID][32]byte{}
	}
	if len(o.m) >= ownersMax {
		for k := range o.m {
			delete(o.m, k)
			break
		}
	}
	o.m[id] = key
}

// PushReceipt reads a push's Push-Receipt header value v: the
// subscription it names, which must be of the push's VAPID key (key;
// hasKey false: the push has no VAPID). An empty v, or receipts off:
// the zero id and no error.
func (a *API) PushReceipt(ctx context.Context, v string, key [32]byte, hasKey bool) (storage.ReceiptSubID, *errno.HTTPError) {
	var zero storage.ReceiptSubID
	if v == "" || !a.cfg.Enabled {
		return zero, nil
	}
	if !hasKey {
		return zero, errPushReceiptAuth
	}
	id, ok := parseID(strings.TrimSpace(v))
	if !ok {
		return zero, errPushReceipt
	}
	switch e := a.own(ctx, id, key); e {
	case nil:
		return id, nil
	case errNoSub:
		return zero, errPushReceipt
	default:
		return zero, e
	}
}

// subscribe is POST /receipts: a new receipt subscription of the
// request's VAPID key; 201 with its URL as Location.
func (a *API) subscribe(ctx context.Context, c *app.RequestContext, x *httpapi.Exchange) {
	if !a.cfg.Enabled {
		x.Fail(errOff)
		return
	}
	body, e := x.ReadBody(subscribeBody, errSubscribeBody)
	if e != nil {
		x.Fail(e)
		return
	}
	key, e := a.host.VAPIDKey(c)
	if e != nil {
		x.Fail(e)
		return
	}
	sub := storage.ReceiptSub{KeyHash: key, Created: time.Now()}
	if len(bytes.TrimSpace(body)) > 0 {
		// {"webhook": null} is none; "" is a webhook, and not a URL.
		var in struct {
			Webhook *string `json:"webhook"`
		}
		if httpapi.DecodeObject(body, &in, true) != nil {
			x.Fail(errSubscribeBody)
			return
		}
		if in.Webhook != nil {
			if err := a.checkWebhook(*in.Webhook); err != nil {
				x.Fail(httpapi.BadRequest(err.Error()))
				return
			}
			sub.Webhook, sub.WebhookSecret = *in.Webhook, newSecret()
		}
	}
	rand.Read(sub.ID[:])
	ctx, cancel := context.WithTimeout(ctx, a.cfg.StorageTimeout)
	defer cancel()
	if e := a.roomForHook(ctx, &sub); e != nil {
		x.Fail(e)
		return
	}
	if err := a.host.Timed(func() error { return a.store.PutReceiptSub(ctx, sub) }); err != nil {
		x.Fail(a.host.StorageError("create receipt subscription", err))
		return
	}
	a.created.Inc()
	u := a.URL(sub.ID)
	c.Response.Header.Set("Location", u)
	httpapi.WriteJSON(c, http.StatusCreated, receiptwire.Subscription{Receipts: u, Webhook: sub.Webhook, WebhookSecret: sub.WebhookSecret})
}

// roomForHook refuses a subscription with a webhook whose key has
// WebhooksPerKey of them already. Counted before the subscription is
// written, so keys creating several at once may each pass at the limit:
// it can be exceeded by as many as were created concurrently.
func (a *API) roomForHook(ctx context.Context, sub *storage.ReceiptSub) *errno.HTTPError {
	limit := a.cfg.WebhooksPerKey
	if sub.Webhook == "" || limit == 0 {
		return nil
	}
	var n int
	if err := a.host.Timed(func() (err error) { n, err = a.store.CountReceiptHooks(ctx, sub.KeyHash, limit); return err }); err != nil {
		return a.host.StorageError("count receipt webhooks", err)
	}
	if n >= limit {
		return tooManyHooks(limit)
	}
	return nil
}

// list is GET /receipts/{id}: the unacknowledged receipts, oldest first;
// with none, it reads again until one comes or ?wait= seconds pass
// (receipt-max-wait at most).
func (a *API) list(ctx context.Context, c *app.RequestContext, x *httpapi.Exchange) {
	id, key, e := a.route(c)
	if e != nil {
		x.Fail(e)
		return
	}
	wait, limit, e := query(c)
	if e != nil {
		x.Fail(e)
		return
	}
	sctx, cancel := context.WithTimeout(ctx, a.cfg.StorageTimeout)
	e = a.own(sctx, id, key)
	cancel()
	if e != nil {
		x.Fail(e)
		return
	}
	deadline := time.Now().Add(min(wait, a.cfg.MaxWait))
	var got []storage.Receipt
	for waiting := false; ; {
		sctx, cancel := context.WithTimeout(ctx, a.cfg.StorageTimeout)
		err := a.host.Timed(func() (err error) {
			got, err = a.store.Receipts(sctx, id, limit)
			return err
		})
		cancel()
		if err != nil {
			x.Fail(a.host.StorageError("read receipts", err))
			return
		}
		if len(got) > 0 || !time.Now().Add(pollEvery).Before(deadline) || a.host.Draining() {
			break
		}
		if !waiting {
			// Each waiting GET reads storage every pollEvery: their
			// number is bounded, beyond it a GET is told to come back.
			select {
			case a.waiting <- struct{}{}:
				defer func() { <-a.waiting }()
				waiting = true
			default:
				c.Response.Header.Set("Retry-After", "1")
				x.Fail(errBusy)
				return
			}
		}
		time.Sleep(pollEvery)
	}
	a.read.Add(len(got))
	httpapi.WriteJSON(c, http.StatusOK, receiptwire.List{Receipts: a.receiptsJSON(got)})
}

// receiptsJSON is receipts as the GET and the webhooks send them.
func (a *API) receiptsJSON(got []storage.Receipt) []receiptwire.Receipt {
	out := make([]receiptwire.Receipt, 0, len(got))
	for _, r := range got {
		j := receiptwire.Receipt{ID: r.ID, MessageID: r.MessageID, Location: a.loc + r.MessageID, State: r.State.String(),
			Delivered: r.State == storage.FateDelivered, At: r.At.UnixMilli()}
		if r.State == storage.FateDropped {
			j.Reason = r.Reason.String()
		}
		out = append(out, j)
	}
	return out
}

// acknowledge is POST /receipts/{id}/ack: the receipts named are removed
// (204); ids already removed, or never issued, are ignored.
func (a *API) acknowledge(ctx context.Context, c *app.RequestContext, x *httpapi.Exchange) {
	body, e := x.ReadBody(AckBody, errAck)
	if e != nil {
		x.Fail(e)
		return
	}
	id, key, e := a.route(c)
	if e != nil {
		x.Fail(e)
		return
	}
	var req receiptwire.Ack
	if httpapi.DecodeObject(body, &req, true) != nil || len(req.IDs) == 0 || len(req.IDs) > ackMax || slices.ContainsFunc(req.IDs, notReceiptID) {
		x.Fail(errAck)
		return
	}
	sctx, cancel := context.WithTimeout(ctx, a.cfg.StorageTimeout)
	defer cancel()
	if e := a.own(sctx, id, key); e != nil {
		x.Fail(e)
		return
	}
	if err := a.host.Timed(func() error { return a.store.AckReceipts(sctx, id, req.IDs) }); err != nil {
		x.Fail(a.host.StorageError("acknowledge receipts", err))
		return
	}
	a.ack.Add(len(req.IDs))
	c.SetStatusCode(http.StatusNoContent)
}

// notReceiptID reports whether v cannot name a receipt (what GET gives
// as "id"). An acknowledgement naming one is refused rather than the id
// ignored: the client did not take it from a GET.
func notReceiptID(v string) bool {
	if v == "" || len(v) > maxReceiptID {
		return true
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return true
		}
	}
	return false
}

// route checks what both routes of a subscription need: receipts on, an
// id, a VAPID key.
func (a *API) route(c *app.RequestContext) (storage.ReceiptSubID, [32]byte, *errno.HTTPError) {
	if !a.cfg.Enabled {
		return storage.ReceiptSubID{}, [32]byte{}, errOff
	}
	id, ok := parseID(c.Param("id"))
	if !ok {
		return id, [32]byte{}, errNoSub
	}
	key, e := a.host.VAPIDKey(c)
	return id, key, e
}

// query reads ?wait= (seconds, default 0) and ?limit=; one given empty
// is not one left out, and no other parameter is taken.
func query(c *app.RequestContext) (time.Duration, int, *errno.HTTPError) {
	if e := httpapi.KnownQuery(c, "wait", "limit"); e != nil {
		return 0, 0, e
	}
	args := c.QueryArgs()
	wait, limit := 0, pageDefault
	var err error
	if args.Has("wait") {
		if wait, err = strconv.Atoi(c.Query("wait")); err != nil || wait < 0 || time.Duration(wait)*time.Second > maxWait {
			return 0, 0, errQuery
		}
	}
	if args.Has("limit") {
		if limit, err = strconv.Atoi(c.Query("limit")); err != nil || limit < 1 || limit > pageMax {
			return 0, 0, errQuery
		}
	}
	return time.Duration(wait) * time.Second, limit, nil
}
