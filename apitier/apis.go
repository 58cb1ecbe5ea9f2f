package apitier

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/cloudwego/hertz/pkg/app"
	"github.com/google/uuid"

	"github.com/autopush-go/autopush/apitier/httpapi"
	"github.com/autopush-go/autopush/apitier/megaphone"
	"github.com/autopush-go/autopush/apitier/pushapi"
	"github.com/autopush-go/autopush/apitier/receipts"
	"github.com/autopush-go/autopush/apitier/registration"
	"github.com/autopush-go/autopush/internal/errno"
	"github.com/autopush-go/autopush/internal/vapid"
	"github.com/autopush-go/autopush/sender"
)

// The HTTP APIs beside WebPush live in packages of their own: the
// broadcasts (apitier/megaphone), the outbound sender's push API
// (apitier/pushapi), the bridge registration API
// (apitier/registration) and delivery receipts (apitier/receipts). The node builds them from its
// Config, registers their routes (routeTable) and serves each request
// of theirs as its own routes' (handle): they answer and read through
// an exchange.

// PushService is what the node needs of the outbound sender: the push
// API's calls (the withdrawal of a bridged push, DELETE /m/{id}, among
// them), and its metrics (/metrics).
type PushService interface {
	pushapi.Service
	WriteMetrics(w io.Writer)
}

var _ PushService = (*sender.Sender)(nil)

// SetPushService wires the sender the push routes and bridged pushes
// use; call before Start. Without one the push routes answer 503, and a
// bridged user's push 503 errno 201.
func (s *Server) SetPushService(ps PushService) {
	s.pushes = ps
	s.pushAPI.SetService(ps)
}

// SetBridgeApps wires the bridges' app ids for the registration routes
// (registration.API.SetApps): safe at any time, from any goroutine.
// Without it no bridge app id is known.
func (s *Server) SetBridgeApps(b registration.Apps) { s.regAPI.SetApps(b) }

// Reload reads the push API's clients file again (SIGHUP); on any
// error the clients in use stay.
func (s *Server) Reload() { s.pushAPI.Reload() }

// newAPIs builds the APIs of their own packages from the node's config.
func (s *Server) newAPIs() error {
	cursorKey, err := pushapi.CursorKey(s.keys.Derive)
	if err != nil {
		return fmt.Errorf("apitier: push API cursor key: %w", err)
	}
	s.pushAPI, err = pushapi.New(pushapi.Config{Keys: s.cfg.PushAPIKeys, ClientsFile: s.cfg.PushClientsFile,
		ClientsPoll: s.cfg.PushClientsPoll, StorageTimeout: s.cfg.StorageTimeout, CursorKey: cursorKey}, s.store, s.log)
	if err != nil {
		return fmt.Errorf("apitier: %w", err)
	}
	s.regAPI = registration.New(registration.Config{AuthKeys: s.cfg.BridgeAuthKeys, MaxChannels: s.cfg.BridgeMaxChannels,
		StorageTimeout: s.cfg.StorageTimeout}, s.store, host{s}, s.log)
	s.megAPI = megaphone.New(megaphone.Config{Tokens: s.cfg.BroadcastTokens, ReaderTokens: s.cfg.BroadcastReaderTokens,
		StorageTimeout: s.cfg.StorageTimeout}, s.store, host{s}, s.log)
	s.recAPI = receipts.New(receipts.Config{Enabled: s.cfg.Receipts, EndpointURL: s.cfg.EndpointURL,
		MaxWait: s.cfg.ReceiptMaxWait, MaxWaiting: s.cfg.ReceiptMaxWaiting, StorageTimeout: s.cfg.StorageTimeout, Webhooks: s.cfg.ReceiptWebhooks,
		WebhookInterval: s.cfg.ReceiptWebhookInterval, WebhookInsecure: s.cfg.ReceiptWebhookInsecure,
		WebhookTimeout: s.cfg.ReceiptWebhookTimeout, WebhookWorkers: s.cfg.ReceiptWebhookWorkers,
		WebhooksPerKey: s.cfg.ReceiptWebhooksPerKey}, s.store, host{s}, s.log)
	return nil
}

// apiRoutes are the routes of the APIs of their own packages, in the
// order routeTable lists them.
func (s *Server) apiRoutes() []routeDef {
	var out []routeDef
	var all []httpapi.Route
	for _, api := range [][]httpapi.Route{s.megAPI.Routes(), s.pushAPI.Routes(), s.regAPI.Routes(), s.recAPI.Routes()} {
		all = append(all, api...)
	}
	for _, r := range all {
		h := r.Handle
		out = append(out, routeDef{Route{r.Method, r.Path}, r.Label, func(ctx context.Context, c *app.RequestContext, st *reqState) {
			h(ctx, c, &st.x)
		}})
	}
	return out
}

// host is the node as the APIs of their own packages use it: their
// Host (registration.Host, receipts.Host, megaphone.Host).
type host struct{ s *Server }

func (h host) MakeEndpoint(uaid, chid uuid.UUID, key []byte) (string, error) {
	return h.s.keys.MakeEndpoint(h.s.cfg.EndpointURL, uaid, chid, key)
}

func (h host) Timed(call func() error) error {
	start := time.Now()
	err := call()
	h.s.metrics.storage(start, err)
	return err
}

func (h host) StorageError(op string, err error) *errno.HTTPError {
	return h.s.storageError(op, err)
}

// VAPIDKey verifies a receipt route's VAPID Authorization (receipts.Host).
func (h host) VAPIDKey(c *app.RequestContext) ([32]byte, *errno.HTTPError) {
	res, err := h.s.verifyVAPID(string(c.Request.Header.Peek("Authorization")), string(c.Request.Header.Peek("Crypto-Key")))
	if err != nil {
		var ve *vapid.Error
		if errors.As(err, &ve) {
			return [32]byte{}, ve.HTTPError()
		}
		return [32]byte{}, errno.InvalidAuth.HTTPError("")
	}
	return sha256.Sum256(res.PublicKey[:]), nil
}

func (h host) Draining() bool { return h.s.draining.Load() }

var (
	_ registration.Host = host{}
	_ receipts.Host     = host{}
	_ megaphone.Host    = host{}
)
