package nodeapi

import (
	"crypto/subtle"
	"errors"
	"io"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/autopush-go/autopush/internal/protocol"
)

// Node is what the node API asks of a connection node. Its methods are
// called from the API's goroutines, concurrently, and return a status of
// this package.
type Node interface {
	// Deliver writes n to the client uaid: StatusDelivered, StatusBusy or
	// StatusNotHere. A connectedAt other than 0 names the connection the
	// caller expects: another one, or one that has unsubscribed a channel,
	// gets StatusStale. n is the caller's only for the call.
	Deliver(uaid [16]byte, n *protocol.Notification, connectedAt int64) int
	// Check has the client uaid read storage: StatusChecking,
	// StatusCheckLater or StatusNotHere.
	Check(uaid [16]byte) int
	// Drop closes the client uaid's connection if it is at least as old
	// as connectedAt: StatusDropped or StatusNotHere.
	Drop(uaid [16]byte, connectedAt int64) int
}

// ServerConfig configures Routes.
type ServerConfig struct {
	// Secret callers must send as a bearer token. Required: with none,
	// every call is refused.
	Secret string
	// MaxBody bounds a PUT /push body, bytes: a larger one gets 413.
	MaxBody int64
	// BodyTimeout bounds reading a PUT /push body once its header is in:
	// a slower one gets 408. 0: the server's own read deadline only.
	BodyTimeout time.Duration
	// Unauthorized, if set, is called for each refused call (a metric).
	Unauthorized func()
}

// Route is one route of the API: a ServeMux pattern and its handler.
type Route struct {
	Pattern string
	Handler http.HandlerFunc
}

// Routes serves the API's three calls on node.
func Routes(node Node, cfg ServerConfig) []Route {
	h := &handler{node: node, cfg: cfg}
	return []Route{
		{RoutePush, h.authed(h.push, true)},
		{RouteNotif, h.authed(h.notif, false)},
		{RouteDrop, h.authed(h.drop, false)},
	}
}

type handler struct {
	node Node
	cfg  ServerConfig
}

// authed serves next to callers with the secret; readsBody says whether
// next reads the request's body.
func (h *handler) authed(next http.HandlerFunc, readsBody bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !Authorized(r, h.cfg.Secret) {
			if h.cfg.Unauthorized != nil {
				h.cfg.Unauthorized()
			}
			refuse(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		if !readsBody && r.ContentLength != 0 {
			abandonBody(w) // a body this call never reads
		}
		next(w, r)
	}
}

// refuse answers an error without reading the request's body.
func refuse(w http.ResponseWriter, msg string, code int) {
	abandonBody(w)
	http.Error(w, msg, code)
}

// abandonBody has the answer written at once and the connection closed
// after it, what is left of the request's body unread. net/http would
// otherwise read the rest of the body (up to 256 KiB) before writing the
// answer, and again before closing: a caller that announced a body and
// sent none would wait for the read deadline (node-api-header-timeout +
// node-api-body-timeout) for its 401.
func abandonBody(w http.ResponseWriter) {
	w.Header().Set("Connection", "close")
	http.NewResponseController(w).SetReadDeadline(time.Now())
}

// Authorized reports whether r may call the API: its bearer token is
// secret. With no secret nobody may: a loopback caller is not trusted
// either (any local process could inject notifications).
func Authorized(r *http.Request, secret string) bool {
	if secret == "" {
		return false
	}
	want := "Bearer " + secret
	got := r.Header.Get("Authorization")
	return subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

func uaidParam(w http.ResponseWriter, r *http.Request) ([16]byte, bool) {
	uaid, ok := protocol.ParseUAID(r.PathValue("uaid"))
	if !ok {
		refuse(w, "invalid uaid", http.StatusBadRequest)
	}
	return uaid, ok
}

func (h *handler) push(w http.ResponseWriter, r *http.Request) {
	uaid, ok := uaidParam(w, r)
	if !ok {
		return
	}
	if h.cfg.BodyTimeout > 0 {
		http.NewResponseController(w).SetReadDeadline(time.Now().Add(h.cfg.BodyTimeout))
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.cfg.MaxBody))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
		return
	case errors.Is(err, os.ErrDeadlineExceeded):
		http.Error(w, "body too slow", http.StatusRequestTimeout)
		return
	case err != nil:
		http.Error(w, "read body", http.StatusBadRequest)
		return
	}
	var connectedAt int64
	// Only a push on a cached route has a query: the others build no map.
	if r.URL.RawQuery != "" {
		if q := r.URL.Query(); q.Has("connected_at") {
			connectedAt, err = strconv.ParseInt(q.Get("connected_at"), 10, 64)
			if err != nil || connectedAt <= 0 {
				http.Error(w, "invalid connected_at", http.StatusBadRequest)
				return
			}
		}
	}
	var n protocol.Notification
	err = DecodeNotification(body, &n)
	if err == nil {
		err = CheckNotification(&n)
	}
	if err != nil {
		http.Error(w, "invalid notification: "+err.Error(), http.StatusBadRequest)
		return
	}
	w.WriteHeader(h.node.Deliver(uaid, &n, connectedAt))
}

func (h *handler) notif(w http.ResponseWriter, r *http.Request) {
	if uaid, ok := uaidParam(w, r); ok {
		w.WriteHeader(h.node.Check(uaid))
	}
}

func (h *handler) drop(w http.ResponseWriter, r *http.Request) {
	connectedAt, err := strconv.ParseInt(r.PathValue("connected_at"), 10, 64)
	if err != nil {
		refuse(w, "invalid connected_at", http.StatusBadRequest)
		return
	}
	if uaid, ok := uaidParam(w, r); ok {
		w.WriteHeader(h.node.Drop(uaid, connectedAt))
	}
}
