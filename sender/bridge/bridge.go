package bridge

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/google/uuid"

	"github.com/autopush-go/autopush/sender"
	"github.com/autopush-go/autopush/sender/bridge/aps"
	"github.com/autopush-go/autopush/storage"
)

// Router types of a registration (the {type} of the registration API).
// gcm is the legacy name of fcm: its registrations are sent through FCM.
const (
	TypeWebPush = storage.RouterWebPush
	TypeFCM     = "fcm"
	TypeGCM     = "gcm"
	TypeAPNs    = "apns"
)

// Router data keys, autopush-rs's: FCM registrations keep "token" and
// "app_id", APNs ones "token", "rel_channel" (the release channel, its
// app id) and, when the device sent one, "aps" (JSON text, from which
// the alert is derived).
const (
	KeyToken      = "token"
	KeyAppID      = "app_id"
	KeyRelChannel = "rel_channel"
	KeyAPS        = "aps"
)

// Provider names of the bridges in the sender.
const (
	ProviderFCM  = "fcm"
	ProviderAPNs = "apns"
)

// Errors of Request.
var (
	// ErrTooLarge: the notification's data is over the provider's limit
	// (413 errno 104). Wrapped with the sizes.
	ErrTooLarge = errors.New("bridge: data over the provider's limit")
	// ErrNotConfigured: the registration's app id (or its bridge) is no
	// longer configured on this node: an operator's fault, never the
	// application server's.
	ErrNotConfigured = errors.New("bridge: not configured")
	// ErrBadRecord: the registration's router data lacks its token or
	// app id.
	ErrBadRecord = errors.New("bridge: registration without token or app id")
)

// DataCheck refuses data its provider would refuse for its size.
type DataCheck func(data map[string]string) error

// Bridge is one configured bridge: its provider's app ids and data check.
type Bridge struct {
	AppIDs []string
	Check  DataCheck
	// Mixup is when a burst of BadDeviceToken answers for one app is
	// reported as a likely sandbox/production mix-up (APNs only).
	Mixup MixupRule
	// Environments names each app's APNs environment for that report:
	// "production", "sandbox" or its endpoint URL (APNs only).
	Environments map[string]string
}

// Bridges are the configured bridges. Safe for concurrent use once built.
type Bridges struct {
	byProvider map[string]*bridge
	log        *slog.Logger
	set        *metrics.Set
	gone       *metrics.Counter
	goneKept   *metrics.Counter
	misconfig  *metrics.Counter
	// mixups watch each APNs app's BadDeviceToken answers.
	mixups map[string]*mixup
	now    func() time.Time
}

type bridge struct {
	apps  map[string]bool
	check DataCheck
}

// New returns the bridges; fcmBridge and apnsBridge may be nil (not
// configured).
func New(fcmBridge, apnsBridge *Bridge, log *slog.Logger) *Bridges {
	if log == nil {
		log = slog.Default()
	}
	b := &Bridges{byProvider: map[string]*bridge{}, log: log.With("component", "bridge"), mixups: map[string]*mixup{}, now: time.Now}
	for name, c := range map[string]*Bridge{ProviderFCM: fcmBridge, ProviderAPNs: apnsBridge} {
		if c == nil || len(c.AppIDs) == 0 {
			continue
		}
		br := &bridge{apps: map[string]bool{}, check: c.Check}
		for _, id := range c.AppIDs {
			br.apps[id] = true
		}
		b.byProvider[name] = br
	}
	set := metrics.NewSet()
	b.set = set
	b.gone = set.NewCounter(mDropped + `{result="dropped"}`)
	b.goneKept = set.NewCounter(mDropped + `{result="kept"}`)
	b.misconfig = set.NewCounter(mMisconfigured)
	if apnsBridge != nil {
		for _, id := range apnsBridge.AppIDs {
			b.mixups[id] = newMixup(set, id, apnsBridge.Environments[id], apnsBridge.Mixup, func() time.Time { return b.now() })
		}
	}
	return b
}

// WriteMetrics writes the bridges' metrics in the Prometheus text format.
func (b *Bridges) WriteMetrics(w io.Writer) { b.set.WritePrometheus(w) }

// Metric names (docs/metrics.md).
const (
	// mDropped{result}: device-gone verdicts: registrations dropped, or
	// kept because the device registered a new token meanwhile.
	mDropped = "autoendpoint_bridge_device_gone_total"
	// mMisconfigured: pushes to registrations whose bridge or app id is
	// not configured here (answered 502 errno 900).
	mMisconfigured = "autoendpoint_bridge_misconfigured_total"
)

// ProviderOf is the sender provider and device platform of a router type;
// false for webpush and unknown types.
func ProviderOf(routerType string) (provider, platform string, ok bool) {
	switch routerType {
	case TypeFCM, TypeGCM:
		return ProviderFCM, "ANDROID", true
	case TypeAPNs:
		return ProviderAPNs, "IOS", true
	}
	return "", "", false
}

// IsBridged reports a router type the bridges route (fcm, gcm, apns).
func IsBridged(routerType string) bool {
	_, _, ok := ProviderOf(routerType)
	return ok
}

// Known reports whether appID is configured for routerType: any app id
// for webpush (its registrations need no provider), the bridge's own for
// the others.
func (b *Bridges) Known(routerType, appID string) bool {
	if routerType == TypeWebPush {
		return true
	}
	p, _, ok := ProviderOf(routerType)
	if !ok || b == nil {
		return false
	}
	br := b.byProvider[p]
	return br != nil && br.apps[appID]
}

// RouterData is what a registration of routerType for appID stores.
func RouterData(routerType, appID, token string) map[string]string {
	switch routerType {
	case TypeFCM, TypeGCM:
		return map[string]string{KeyToken: token, KeyAppID: appID}
	case TypeAPNs:
		return map[string]string{KeyToken: token, KeyRelChannel: appID}
	}
	return nil
}

// appID is a registration's app id.
func appID(u *storage.User) string {
	if u.RouterType == TypeAPNs {
		return u.RouterData[KeyRelChannel]
	}
	return u.RouterData[KeyAppID]
}

// Notification is a checked WebPush notification to a bridged user.
type Notification struct {
	CHID    uuid.UUID
	TTL     int64 // seconds, as the application server sent it (capped)
	Urgency string
	Topic   string
	// Body is the payload in base64url ("" for a push without one);
	// Encoding, Encryption and CryptoKey its encryption headers.
	Body, Encoding, Encryption, CryptoKey string
}

// Data is the notification's data as Firefox for Android and iOS read it
// (autopush-rs's keys): chid, and with a payload body, con and, for
// aesgcm, enc and cryptokey.
func Data(n *Notification) map[string]string {
	d := map[string]string{"chid": n.CHID.String()}
	if n.Body == "" {
		return d
	}
	d["body"] = n.Body
	for k, v := range map[string]string{"con": n.Encoding, "enc": n.Encryption, "cryptokey": n.CryptoKey} {
		if v != "" {
			d[k] = v
		}
	}
	return d
}

// Request is the sender's request for n to u, a bridged user. Errors:
// ErrTooLarge (413), ErrNotConfigured, ErrBadRecord.
func (b *Bridges) Request(u *storage.User, n *Notification) (sender.Request, error) {
	prov, platform, ok := ProviderOf(u.RouterType)
	if !ok {
		return sender.Request{}, fmt.Errorf("%w: router type %q", ErrNotConfigured, u.RouterType)
	}
	app, token := appID(u), u.RouterData[KeyToken]
	if app == "" || token == "" {
		return sender.Request{}, ErrBadRecord
	}
	if !b.Known(u.RouterType, app) {
		b.misconfig.Inc()
		b.log.Error("push to a registration whose app id is not configured", "type", u.RouterType, "app_id", app, "uaid", u.UAID)
		return sender.Request{}, fmt.Errorf("%w: %s app id %q", ErrNotConfigured, u.RouterType, app)
	}
	data := Data(n)
	if dict := u.RouterData[KeyAPS]; dict != "" && u.RouterType == TypeAPNs {
		// The provider derives the alert from it (apns.Payload).
		data[aps.DataKey] = dict
	}
	if check := b.byProvider[prov].check; check != nil {
		if err := check(data); err != nil {
			return sender.Request{}, fmt.Errorf("%w: %v", ErrTooLarge, err)
		}
	}
	return sender.Request{
		Provider: prov, Platform: platform, PushKey: token,
		Bridge: &storage.PushBridge{UAID: u.UAID, CHID: n.CHID, AppID: app, TTL: n.TTL,
			Urgency: n.Urgency, Topic: n.Topic, Data: data},
	}, nil
}

// Store is what DeviceGone and Settled need of storage.
type Store interface {
	GetUser(ctx context.Context, uaid uuid.UUID) (storage.User, error)
	DropUserAt(ctx context.Context, uaid uuid.UUID, connectedAt int64) error
	Settle(ctx context.Context, uaid uuid.UUID, id storage.FateID, s storage.FateState, reason storage.DropReason) (bool, error)
	SettleUser(ctx context.Context, uaid, chid uuid.UUID, reason storage.DropReason) (int, error)
}

// WithdrawCause is the attempt log's cause of a bridged push withdrawn
// by its application server (DELETE of its Location).
const WithdrawCause = "withdrawn by the application server (DELETE of its Location) before it was sent"

// Settled returns the sender's OnFinal handler: a tracked WebPush
// message's fate (docs/receipts.md) ends with its bridged push, as
// bridge_transmitted when the provider took it (SENT: FCM and APNs
// confirm no delivery to the device), as dropped, withdrawn when its
// application server withdrew it (FAILED with WithdrawCause), and as
// errored when it was not sent otherwise (FAILED: refused, expired
// before it could be sent; GIVEN_UP).
func (b *Bridges) Settled(store Store) func(ctx context.Context, p storage.Push) {
	return func(ctx context.Context, p storage.Push) {
		if p.Bridge == nil || p.Bridge.Fate == "" {
			return
		}
		state, reason := storage.FateErrored, storage.DropNone
		switch a := p.LastAttempt(); {
		case p.State == storage.PushSent:
			state = storage.FateBridgeTransmitted
		case p.State == storage.PushFailed && a != nil && a.Cause == WithdrawCause:
			state, reason = storage.FateDropped, storage.DropWithdrawn
		}
		if _, err := store.Settle(ctx, p.Bridge.UAID, storage.NewFateID(p.Bridge.Fate), state, reason); err != nil {
			b.log.Warn("tracked bridged push: fate not settled; it settles as expired", "push", p.ID, "state", state.String(), "error", err)
		}
	}
}

// DeviceGone returns the sender's OnDeviceGone handler: it drops the
// registration the gone push was for, unless the device registered
// another token since (PUT …/registration/{uaid}): that registration
// works, and the verdict was about the old token. The drop names the
// record it read (DropUserAt), so a new token registered between the
// read and the drop survives it too. The application server's next push
// then gets 410 errno 106.
func (b *Bridges) DeviceGone(store Store) func(ctx context.Context, p storage.Push) {
	return func(ctx context.Context, p storage.Push) {
		if p.Bridge == nil {
			return
		}
		u, err := store.GetUser(ctx, p.Bridge.UAID)
		switch {
		case errors.Is(err, storage.ErrNotFound):
			return // dropped already
		case err != nil:
			b.log.Warn("device gone: registration not read; it stays until the next verdict", "uaid", p.Bridge.UAID, "error", err)
			return
		case u.RouterData[KeyToken] != p.PushKey:
			b.kept(u.UAID, p.ID, "the registration has a new token")
			return
		}
		if err := store.DropUserAt(ctx, u.UAID, u.ConnectedAt); err != nil {
			b.log.Warn("device gone: registration not dropped", "uaid", u.UAID, "error", err)
			return
		}
		// The drop reports no outcome: a record still there is newer.
		_, err = store.GetUser(ctx, u.UAID)
		switch {
		case err == nil:
			b.kept(u.UAID, p.ID, "the registration changed while it was being dropped (a new token, or a refresh)")
			return
		case !errors.Is(err, storage.ErrNotFound):
			b.log.Warn("device gone: registration dropped unless it changed meanwhile; not read back", "uaid", u.UAID, "error", err)
		}
		b.gone.Inc()
		b.log.Info("device gone: registration dropped", "uaid", u.UAID, "provider", p.Provider, "push", p.ID)
		// Its other tracked messages will not reach it either.
		if _, err := store.SettleUser(ctx, u.UAID, uuid.Nil, storage.DropUserGone); err != nil {
			b.log.Warn("device gone: tracked messages not settled; they settle as expired", "uaid", u.UAID, "error", err)
		}
	}
}

// kept counts and logs a device-gone verdict that left a newer
// registration in place.
func (b *Bridges) kept(uaid, push uuid.UUID, why string) {
	b.goneKept.Inc()
	b.log.Info("device gone for an older registration; it stays", "uaid", uaid, "push", push, "why", why)
}
