package apitier

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/cloudwego/hertz/pkg/app"
	"github.com/google/uuid"

	"github.com/autopush-go/autopush/apitier/sender"
	"github.com/autopush-go/autopush/internal/errno"
	"github.com/autopush-go/autopush/storage"
)

// The outbound sender's HTTP API (seed 002), for application back-ends:
//
//	POST /push             accept a push (the seed's body); 201, empty body, Location /push/{id}
//	GET  /push/{id}        its state and attempt log
//	GET  /push?state=S     page through the pushes in state S (cursor, limit)
//
// Every call needs "Authorization: Bearer <key>" with one of push-api-keys
// (compared in constant time); none configured closes the API (401).

// PushService is what the routes need of the sender.
type PushService interface {
	Accept(ctx context.Context, r sender.Request) (storage.Push, error)
	Get(ctx context.Context, id uuid.UUID) (storage.Push, error)
	List(ctx context.Context, state storage.PushState, cursor string, limit int) ([]storage.Push, string, error)
	Withdraw(ctx context.Context, id uuid.UUID, cause string) (bool, error)
	WriteMetrics(w io.Writer)
}

var _ PushService = (*sender.Sender)(nil)

// SetPushService wires the sender the push routes use; call before Start.
// Without one the routes answer 503.
func (s *Server) SetPushService(ps PushService) { s.pushes = ps }

// Route labels of the push API.
const (
	routePushPost = "push_post"
	routePushGet  = "push_get"
	routePushList = "push_list"
)

// maxPushBody bounds a POST /push body: the longest message escaped as
// JSON, with room for the other fields.
const maxPushBody = 32 << 10

var (
	errPushAuth        = errno.InvalidAuth.HTTPError("Missing or invalid push API key")
	errPushUnavailable = errno.RetryBackoff.HTTPError("Database error while saving the push")
	errPushOff         = &errno.HTTPError{Status: http.StatusServiceUnavailable, Errno: errno.None, Message: "The push API is not enabled on this node"}
	errPushNotFound    = errno.InvalidEndpoint.HTTPError("No such push")
	errPushTooLarge    = errno.PayloadTooLarge.HTTPError("The request body is over 32 KiB")
)

func badField(msg string) *errno.HTTPError {
	return &errno.HTTPError{Status: http.StatusBadRequest, Errno: errno.None, Message: msg}
}

// pushAuthorized checks the bearer key against every configured one.
func (s *Server) pushAuthorized(c *app.RequestContext) bool {
	h := string(c.Request.Header.Peek("Authorization"))
	scheme, key, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || key == "" {
		return false
	}
	match := 0
	for _, k := range s.cfg.PushAPIKeys {
		match |= subtle.ConstantTimeCompare([]byte(key), []byte(k))
	}
	return match == 1
}

// pushGate answers the request when it cannot go on (no service, no or a
// wrong key) and reports whether it may.
func (s *Server) pushGate(c *app.RequestContext, st *reqState) bool {
	if !s.pushAuthorized(c) {
		s.writeError(c, st, errPushAuth)
		c.Response.Header.Set("WWW-Authenticate", `Bearer realm="push"`)
		return false
	}
	if s.pushes == nil {
		s.writeError(c, st, errPushOff)
		return false
	}
	return true
}

// pushBody is the seed's POST /push body.
type pushBody struct {
	Platform            *string `json:"platform"`
	MessagePrototypeKey *string `json:"messagePrototypeKey"`
	PushKey             *string `json:"pushKey"`
	Message             *string `json:"message"`
	CronExpression      *string `json:"cronExpression"`
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func (s *Server) handlePushPost(ctx context.Context, c *app.RequestContext, st *reqState) {
	if !s.pushGate(c, st) {
		return
	}
	var buf []byte
	body, err := readBodyUpTo(c, &buf, maxPushBody, errPushTooLarge)
	if err != nil {
		s.writeError(c, st, err)
		return
	}
	st.bodyRead = true
	req, herr := parsePushBody(body)
	if herr != nil {
		s.writeError(c, st, herr)
		return
	}
	p, err2 := s.pushes.Accept(ctx, req)
	var fe *sender.FieldError
	switch {
	case errors.As(err2, &fe):
		s.writeError(c, st, badField(fe.Error()))
		return
	case err2 != nil:
		s.pushStorageError(c, st, "accept push", err2)
		return
	}
	c.Response.Header.Set("Location", "/push/"+p.ID.String())
	c.SetStatusCode(http.StatusCreated)
}

// parsePushBody decodes the seed's POST /push body: one JSON object with
// only the seed's fields, each a string or null (null and absent are "").
// The field rules are the sender's (sender.Sender.Accept).
func parsePushBody(body []byte) (sender.Request, *errno.HTTPError) {
	var b pushBody
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		return sender.Request{}, badField("Invalid JSON body: " + jsonProblem(err))
	}
	if _, err := dec.Token(); err != io.EOF {
		return sender.Request{}, badField("Invalid JSON body: more than one value")
	}
	return sender.Request{
		Platform: str(b.Platform), PrototypeKey: str(b.MessagePrototypeKey), PushKey: str(b.PushKey),
		Message: str(b.Message), CronExpression: str(b.CronExpression),
	}, nil
}

// jsonProblem names what is wrong without echoing the decoder's Go types.
func jsonProblem(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field == "" {
			return "the body must be a JSON object"
		}
		return te.Field + " must be a string"
	}
	msg := err.Error()
	if strings.HasPrefix(msg, "json: unknown field ") {
		return "unknown field " + strings.TrimPrefix(msg, "json: unknown field ")
	}
	return msg
}

// invalidMessages are the 400 answers to what the store refuses
// (storage.ErrInvalid), by pushStorageError's op: the sender checks the
// fields first, so only a cursor a client made up should get here.
var invalidMessages = map[string]string{
	"list pushes": "cursor: not a cursor this API gave",
	"accept push": "Invalid push",
	"get push":    "Invalid push id",
}

// pushStorageError answers a failed sender call: 404, 400 or 503.
func (s *Server) pushStorageError(c *app.RequestContext, st *reqState, op string, err error) {
	if errors.Is(err, storage.ErrNotFound) {
		s.writeError(c, st, errPushNotFound)
		return
	}
	if errors.Is(err, storage.ErrInvalid) {
		// The store's text names the backend and its internals: the
		// client gets what it can act on, the log the rest.
		s.log.Info("push API: the store refused the request", "op", op, "error", err)
		s.writeError(c, st, badField(invalidMessages[op]))
		return
	}
	s.log.Warn("push API storage error", "op", op, "error", err)
	s.writeError(c, st, errPushUnavailable)
}

func (s *Server) handlePushGet(ctx context.Context, c *app.RequestContext, st *reqState) {
	if !s.pushGate(c, st) {
		return
	}
	id, err := uuid.Parse(c.Param("id"))
	if err != nil {
		s.writeError(c, st, errPushNotFound)
		return
	}
	p, err := s.pushes.Get(ctx, id)
	if err != nil {
		s.pushStorageError(c, st, "get push", err)
		return
	}
	writeJSON(c, http.StatusOK, pushView(&p))
}

func (s *Server) handlePushList(ctx context.Context, c *app.RequestContext, st *reqState) {
	if !s.pushGate(c, st) {
		return
	}
	state := storage.PushState(c.Query("state"))
	if !state.Valid() {
		s.writeError(c, st, badField("state: must be one of SCHEDULED, PENDING, IN_MEMORY, RETRY, GIVEN_UP, SENT, FAILED"))
		return
	}
	limit := 100
	if v := c.Query("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > storage.MaxPushPage {
			s.writeError(c, st, badField("limit: must be 1.."+strconv.Itoa(storage.MaxPushPage)))
			return
		}
		limit = n
	}
	ps, next, err := s.pushes.List(ctx, state, c.Query("cursor"), limit)
	if err != nil {
		s.pushStorageError(c, st, "list pushes", err)
		return
	}
	out := make([]map[string]any, len(ps))
	for i := range ps {
		out[i] = pushView(&ps[i])
	}
	var cursor any
	if next != "" {
		cursor = next
	}
	writeJSON(c, http.StatusOK, map[string]any{"pushes": out, "next": cursor})
}

// pushView is a push as the API shows it: the seed's field names, times
// in RFC 3339 (UTC, ms).
func pushView(p *storage.Push) map[string]any {
	var cron any
	if p.CronExpression != "" {
		cron = p.CronExpression
	}
	attempts := make([]map[string]any, len(p.Attempts))
	for i, a := range p.Attempts {
		attempts[i] = map[string]any{
			"n": a.N, "status": a.Status, "node": a.Node, "started": rfc3339(a.Started),
			"called": nullableTime(a.Called), "millis": a.Millis,
			"errorType": nullable(string(a.ErrorType)), "providerCode": nullableInt(a.ProviderCode),
			"providerReason": nullable(a.ProviderReason), "providerMessage": nullable(a.ProviderMessage),
			"cause": nullable(a.Cause), "dedupKey": nullable(a.DedupKey),
		}
	}
	return map[string]any{
		"id": p.ID.String(), "provider": p.Provider, "platform": p.Platform, "messagePrototypeKey": p.PrototypeKey,
		"pushKey": p.PushKey, "message": p.Message, "cronExpression": cron, "state": p.State,
		"at": rfc3339(p.At), "created": rfc3339(p.Created), "updated": rfc3339(p.Updated),
		"attempts": attempts,
	}
}

func rfc3339(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// nullableTime is ms in RFC 3339, or null for 0 (not happened).
func nullableTime(ms int64) any {
	if ms == 0 {
		return nil
	}
	return rfc3339(ms)
}

func nullableInt(n int) any {
	if n == 0 {
		return nil
	}
	return n
}
