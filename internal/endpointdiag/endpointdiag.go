package endpointdiag

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/autopush-go/autopush/internal/protocol"
	"github.com/autopush-go/autopush/internal/token"
	"github.com/autopush-go/autopush/storage"
)

// Route is the endpoint node's admin route serving a Report on its
// metrics-listen: GET Route?endpoint=<endpoint URL or token> or
// ?uaid=<UAID>, with an admin token (docs/operations.md, "Diagnosing an
// endpoint").
const Route = "/__endpoint__"

// DefaultLimit is how many messages a Report lists of each kind.
const DefaultLimit = 20

// Report is the diagnosis of one endpoint (or one UAID: then Version,
// CHID, KeyHash and Registered are absent).
type Report struct {
	Version    string        `json:"version,omitempty"`
	UAID       string        `json:"uaid"`
	CHID       string        `json:"channel_id,omitempty"`
	KeyHash    string        `json:"vapid_key_sha256,omitempty"`
	User       *storage.User `json:"router_record,omitempty"`
	UserError  string        `json:"router_error,omitempty"`
	Registered *bool         `json:"channel_registered,omitempty"`
	Channels   int           `json:"channels"`
	Topic      []Message     `json:"topic_messages"`
	Pending    []Message     `json:"pending_messages"`
}

// Message is a stored message as a Report lists it: no payload.
type Message struct {
	Version string    `json:"version"`
	Topic   string    `json:"topic,omitempty"`
	Channel string    `json:"channel_id"`
	Bytes   int       `json:"data_bytes"`
	Expires time.Time `json:"expires"`
}

// Query is what to diagnose: an endpoint, or every channel of a UAID
// (Endpoint nil).
type Query struct {
	UAID     uuid.UUID
	Endpoint *token.Endpoint
}

// ErrInput is wrapped by Parse's errors: the input names no endpoint or
// UAID (a caller's mistake, not the store's).
var ErrInput = errors.New("endpointdiag")

// Parse reads s: a UAID (32 hex digits or a dashed UUID), an endpoint URL
// (…/wpush/v1/TOKEN, …/wpush/v2/TOKEN), or a bare token (v1 unless given
// as v2/TOKEN), decrypted with keys.
func Parse(keys *token.Keys, s string) (Query, error) {
	s = strings.TrimSpace(s)
	if uaid, ok := protocol.ParseUAID(s); ok {
		return Query{UAID: uaid}, nil
	}
	version, tok := splitEndpoint(s)
	if tok == "" {
		return Query{}, fmt.Errorf("%w: %q is no endpoint URL, token or UAID", ErrInput, s)
	}
	ep, err := keys.ParseToken(version, tok)
	if err != nil {
		return Query{}, fmt.Errorf("%w: endpoint: %w (made with another crypto-key, or not an endpoint of this service)", ErrInput, err)
	}
	return Query{UAID: ep.UAID, Endpoint: &ep}, nil
}

// splitEndpoint accepts a full endpoint URL (…/wpush/v2/TOKEN) or a bare
// token (taken as v1 unless prefixed "v2/").
func splitEndpoint(s string) (version, tok string) {
	if i := strings.Index(s, "/wpush/"); i >= 0 {
		s = s[i+len("/wpush/"):]
	}
	if v, t, ok := strings.Cut(s, "/"); ok {
		return v, t
	}
	return "", s
}

// Reader is what a diagnosis reads of the store; it writes nothing.
type Reader interface {
	GetUser(ctx context.Context, uaid uuid.UUID) (storage.User, error)
	HasChannel(ctx context.Context, uaid, chid uuid.UUID) (bool, error)
	Channels(ctx context.Context, uaid uuid.UUID) ([]uuid.UUID, error)
	TopicMessages(ctx context.Context, uaid uuid.UUID, limit int) ([]storage.Message, error)
	TimestampMessages(ctx context.Context, uaid uuid.UUID, after uint64, limit int) ([]storage.Message, error)
}

var _ Reader = storage.Store(nil)

// Diagnose reads q's state from store, listing up to limit messages of
// each kind (topic, and pending after the read cursor).
func Diagnose(ctx context.Context, store Reader, q Query, limit int) (*Report, error) {
	rep := &Report{UAID: protocol.FormatUAID(q.UAID), Topic: []Message{}, Pending: []Message{}}
	if ep := q.Endpoint; ep != nil {
		rep.Version, rep.CHID = fmt.Sprintf("v%d", ep.Version), uuid.UUID(ep.CHID).String()
		if len(ep.KeyHash) > 0 {
			rep.KeyHash = hex.EncodeToString(ep.KeyHash)
		}
	}
	u, err := store.GetUser(ctx, q.UAID)
	switch {
	case err == nil:
		rep.User = &u
	case errors.Is(err, storage.ErrNotFound):
		rep.UserError = "no router record: the user agent expired or was dropped (application servers get 410)"
	default:
		return nil, fmt.Errorf("endpointdiag: router record: %w", err)
	}
	if q.Endpoint != nil {
		registered, err := store.HasChannel(ctx, q.UAID, q.Endpoint.CHID)
		if err != nil {
			return nil, fmt.Errorf("endpointdiag: channel: %w", err)
		}
		rep.Registered = &registered
	}
	chans, err := store.Channels(ctx, q.UAID)
	if err != nil {
		return nil, fmt.Errorf("endpointdiag: channels: %w", err)
	}
	rep.Channels = len(chans)
	topics, err := store.TopicMessages(ctx, q.UAID, storage.MaxFetchLimit)
	if err != nil {
		return nil, fmt.Errorf("endpointdiag: topic messages: %w", err)
	}
	rep.Topic = summarize(topics, limit)
	var cursor uint64
	if rep.User != nil {
		cursor = rep.User.Cursor
	}
	pending, err := store.TimestampMessages(ctx, q.UAID, cursor, max(limit, 1))
	if err != nil {
		return nil, fmt.Errorf("endpointdiag: pending messages: %w", err)
	}
	rep.Pending = summarize(pending, limit)
	return rep, nil
}

func summarize(ms []storage.Message, limit int) []Message {
	out := []Message{}
	for i := range ms {
		if len(out) == limit {
			break
		}
		out = append(out, Message{Version: ms[i].Version, Topic: ms[i].Topic, Channel: ms[i].CHID.String(),
			Bytes: len(ms[i].Data), Expires: ms[i].Expiry().UTC()})
	}
	return out
}

// WriteJSON writes r as indented JSON, one object and a newline.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteText writes r for a person to read.
func (r *Report) WriteText(w io.Writer) {
	if r.Version == "" {
		fmt.Fprintf(w, "uaid %s (every channel)\n", r.UAID)
	} else {
		fmt.Fprintf(w, "endpoint %s  uaid %s  channel %s\n", r.Version, r.UAID, r.CHID)
	}
	if r.KeyHash != "" {
		fmt.Fprintf(w, "VAPID key sha256 %s (pushes must be signed with this key)\n", r.KeyHash)
	}
	if r.User == nil {
		fmt.Fprintln(w, "router:", r.UserError)
	} else {
		node := r.User.NodeID
		if node == "" {
			node = "(not connected: pushes are stored)"
		}
		fmt.Fprintf(w, "router: type %s, node %s, connected_at %s, last_connect %s, cursor %d\n",
			r.User.RouterType, node, time.UnixMilli(r.User.ConnectedAt).UTC().Format(time.RFC3339),
			time.UnixMilli(r.User.LastConnect).UTC().Format(time.RFC3339), r.User.Cursor)
	}
	if r.Registered != nil {
		fmt.Fprintf(w, "channel registered: %v (user has %d channels)\n", *r.Registered, r.Channels)
	} else {
		fmt.Fprintf(w, "channels: %d\n", r.Channels)
	}
	fmt.Fprintf(w, "stored: %d topic, %d pending after the cursor (listed up to the limit)\n", len(r.Topic), len(r.Pending))
	for _, m := range append(r.Topic, r.Pending...) {
		fmt.Fprintf(w, "  %s channel %s topic %q %d bytes, expires %s\n", m.Version, m.Channel, m.Topic, m.Bytes, m.Expires.Format(time.RFC3339))
	}
}
