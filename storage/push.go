package storage

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
)

// PushState is where an outbound push (the sender's, docs/sender.md) is in its
// life cycle. The names and their meanings are the original Java sender's.
type PushState string

// The Java sender's states. Final ones (GIVEN_UP, SENT, FAILED) never
// change again.
const (
	// PushScheduled waits for its cron window (At is the next fire time).
	PushScheduled PushState = "SCHEDULED"
	// PushPending found the queue full when it was received or read; the
	// SendPending job queues it when there is room (At: when it went
	// pending).
	PushPending PushState = "PENDING"
	// PushInMemory is in a sender node's queue or being sent, under that
	// node's lease (Owner; At is when the lease expires).
	PushInMemory PushState = "IN_MEMORY"
	// PushRetry failed with a retryable error; At is the next try.
	PushRetry PushState = "RETRY"
	// PushGivenUp used every attempt it had on retryable errors.
	PushGivenUp PushState = "GIVEN_UP"
	// PushSent was accepted by the provider.
	PushSent PushState = "SENT"
	// PushFailed failed with an error that allows no retry.
	PushFailed PushState = "FAILED"
)

// PushStates lists every state, in life-cycle order.
var PushStates = []PushState{PushScheduled, PushPending, PushInMemory, PushRetry, PushGivenUp, PushSent, PushFailed}

// Valid reports whether s is one of the states above.
func (s PushState) Valid() bool {
	for _, v := range PushStates {
		if s == v {
			return true
		}
	}
	return false
}

// Final reports whether s is a state a push never leaves.
func (s PushState) Final() bool { return s == PushGivenUp || s == PushSent || s == PushFailed }

// AttemptStatus is the status of one send attempt (the Java sender's
// SEND_ATTEMPTS.STATUS column, plus INTERRUPTED).
type AttemptStatus string

// Attempt statuses.
const (
	// AttemptInProcess is written before the provider is called.
	AttemptInProcess AttemptStatus = "IN_PROCESS"
	AttemptOK        AttemptStatus = "OK"
	AttemptError     AttemptStatus = "ERROR"
	// AttemptInterrupted marks an attempt found IN_PROCESS after its node
	// stopped: the provider may or may not have received it.
	AttemptInterrupted AttemptStatus = "INTERRUPTED"
)

// ErrorType classifies a failed attempt (the Java sender's ERROR_TYPE; its
// SWRVE is PROVIDER here, since providers are pluggable).
type ErrorType string

// Error types.
const (
	ErrorProvider     ErrorType = "PROVIDER"
	ErrorPrototypeKey ErrorType = "MESSAGE_PROTOTYPE_KEY"
	ErrorOther        ErrorType = "OTHER"
)

// Attempt is one try to send a push: a row of the Java sender's
// SEND_ATTEMPTS.
type Attempt struct {
	// N numbers the push's attempts from 1.
	N      int           `json:"n"`
	Status AttemptStatus `json:"status"`
	// Node is the sender node that made it.
	Node string `json:"node,omitempty"`
	// Started is when the attempt row was written, ms since the epoch.
	Started int64 `json:"started"`
	// Called is when the provider's gate let the attempt through to its
	// client, ms since the epoch (0: IN_PROCESS, or ended without a
	// call). Called - Started is the wait for the provider's rate; the
	// sender's calls, in Called order, keep to the gate's bound.
	Called int64 `json:"called,omitempty"`
	// Millis is how long the provider call took from Called (0 while
	// IN_PROCESS).
	Millis    int64     `json:"millis"`
	ErrorType ErrorType `json:"errorType,omitempty"`
	// ProviderCode is the provider's HTTP status (0: none).
	ProviderCode int `json:"providerCode,omitempty"`
	// ProviderReason is the provider's own error code when it has one
	// (FCM "UNREGISTERED", APNs "BadDeviceToken").
	ProviderReason string `json:"providerReason,omitempty"`
	// ProviderMessage is the provider's error text.
	ProviderMessage string `json:"providerMessage,omitempty"`
	// Cause is the error of an OTHER failure or an interruption.
	Cause string `json:"cause,omitempty"`
	// DedupKey is the key the provider was given to collapse repeats
	// (the push id), "" when the provider takes none.
	DedupKey string `json:"dedupKey,omitempty"`
}

// Push is an outbound push and its attempt log.
type Push struct {
	// ID is a version 7 UUID: ids sort by creation time.
	ID uuid.UUID
	// Provider names the provider that sends it ("swrve").
	Provider     string
	Platform     string // "IOS" or "ANDROID"
	PrototypeKey string // the message prototype (mapped to a campaign)
	PushKey      string // the device's (user's) key at the provider
	Message      string
	// CronExpression, when set, restricts sending to the times it
	// allows (Quartz syntax).
	CronExpression string
	State          PushState
	// At is when the state needs attention, ms since the epoch: the due
	// time (SCHEDULED, RETRY), when it went pending (PENDING), the lease
	// expiry (IN_MEMORY), when it finished (final states). The stores
	// index pushes by (State, At).
	At int64
	// Owner is the sender node holding the lease (IN_MEMORY), else "".
	Owner string
	// Created and Updated are ms since the epoch.
	Created, Updated int64
	// Version counts the writes of the push: 1 when saved, +1 by each
	// UpdatePush. Conditional updates compare it.
	Version int64
	// TTL, seconds, makes the push (and its index entry) expire that long
	// after this write; 0 keeps it. The sender sets it on final states.
	TTL int64
	// Attempts is the attempt log, oldest first.
	Attempts []Attempt
	// Bridge is set on a WebPush notification to a bridged (FCM, APNs)
	// user, which the API tier hands to the sender; nil on a push of the
	// sender's own API.
	Bridge *PushBridge
	// Client names the push API's client that sent the push (its
	// pushes, quotas and fair share are its own); "" for a push the
	// WebPush tier hands over (a bridged one) or of a client-less key.
	Client string
}

// PushBridge is what the sender needs to deliver a WebPush notification
// to a bridged user through its provider, and to drop the user when the
// provider says the device is gone.
type PushBridge struct {
	UAID uuid.UUID `json:"uaid"`
	CHID uuid.UUID `json:"chid"`
	// AppID is the registration's app id: which credentials, FCM project
	// or APNs topic the provider sends with.
	AppID string `json:"app_id"`
	// TTL is the notification's WebPush TTL in seconds, counted from the
	// push's Created: once it has passed the push is not sent (Expires).
	TTL int64 `json:"ttl"`
	// Urgency is the RFC 8030 Urgency header ("" when absent); Topic
	// the Topic header, the provider's collapse key.
	Urgency string `json:"urgency,omitempty"`
	Topic   string `json:"topic,omitempty"`
	// Fate is the message id of a tracked WebPush message (FateStore):
	// the push's final state settles its fate. "" when untracked.
	Fate string `json:"fate,omitempty"`
	// Data is the notification as Firefox for Android and iOS read it:
	// chid, and for a push with a payload body (base64url), con, and for
	// aesgcm enc and cryptokey.
	Data map[string]string `json:"data"`
}

// Expires is when a bridged push stops being worth sending, ms since the
// epoch. TTL 0 ("now or never") gets MinBridgeTTL: a provider's hiccup is
// retried within it, and the providers still hear TTL 0 (APNs:
// apns-expiration 0; FCM raises it to its own minimum, 60 s, anyway).
func (b *PushBridge) Expires(created int64) int64 {
	return created + max(b.TTL, MinBridgeTTL)*1000
}

// MinBridgeTTL is the least time, in seconds, a bridged push is tried for.
const MinBridgeTTL = 60

// MaxPushBridge bounds a bridged push's Bridge, as JSON: a 4 KiB payload
// in base64url with its encryption headers and ids fits well under it.
const MaxPushBridge = 16 << 10

// LastAttempt returns the newest attempt, or nil.
func (p *Push) LastAttempt() *Attempt {
	if len(p.Attempts) == 0 {
		return nil
	}
	return &p.Attempts[len(p.Attempts)-1]
}

// Bounds of pushes every backend enforces (the API tier's are stricter).
const (
	MaxPushText     = 4096 // bytes of Message
	MaxPushField    = 256  // bytes of PushKey, PrototypeKey, CronExpression, Provider, Owner, Client
	MaxPushAttempts = 100  // entries of the attempt log
	MaxPushTTL      = 10 * 365 * 24 * 3600
	MaxPushPage     = 1000
	// MaxPushBackdate is how far before now the At of a push in a
	// non-final state may be when it is written. Every writer stamps At
	// with a due time, a lease expiry or its own now, so only clock skew
	// makes it earlier; the scylla backend relies on this to read due
	// entries from a floor instead of from the start of the index (where
	// the tombstones of moved entries lie).
	MaxPushBackdate = time.Minute
)

// ValidatePush checks a push passed to SavePush or UpdatePush.
func ValidatePush(p *Push) error {
	switch {
	case p.ID == uuid.Nil:
		return fmt.Errorf("push id is the nil UUID: %w", ErrInvalid)
	case !p.State.Valid():
		return fmt.Errorf("push state %q is not a push state: %w", p.State, ErrInvalid)
	case p.Version < 1:
		return fmt.Errorf("push version %d is not positive: %w", p.Version, ErrInvalid)
	case p.At < 0 || p.Created <= 0:
		return fmt.Errorf("push times at=%d created=%d: %w", p.At, p.Created, ErrInvalid)
	case !p.State.Final() && p.At < time.Now().Add(-MaxPushBackdate).UnixMilli():
		return fmt.Errorf("push at %d is more than %s before now: %w", p.At, MaxPushBackdate, ErrInvalid)
	case p.TTL < 0 || p.TTL > MaxPushTTL:
		return fmt.Errorf("push ttl %d is outside 0..%d: %w", p.TTL, MaxPushTTL, ErrInvalid)
	case len(p.Message) > MaxPushText || !utf8.ValidString(p.Message):
		return fmt.Errorf("push message is not UTF-8 of at most %d bytes: %w", MaxPushText, ErrInvalid)
	case len(p.Attempts) > MaxPushAttempts:
		return fmt.Errorf("push has %d attempts, over %d: %w", len(p.Attempts), MaxPushAttempts, ErrInvalid)
	}
	for _, f := range []string{p.Provider, p.Platform, p.PrototypeKey, p.PushKey, p.CronExpression, p.Owner, p.Client} {
		if len(f) > MaxPushField {
			return fmt.Errorf("push field of %d bytes, over %d: %w", len(f), MaxPushField, ErrInvalid)
		}
	}
	if p.Client == AllClients {
		return fmt.Errorf("push client %q names every client: %w", AllClients, ErrInvalid)
	}
	if p.Provider == "" || p.PushKey == "" {
		return fmt.Errorf("push without provider or push key: %w", ErrInvalid)
	}
	if p.Bridge != nil {
		b, err := json.Marshal(p.Bridge)
		if err != nil || len(b) > MaxPushBridge {
			return fmt.Errorf("push bridge is not JSON of at most %d bytes: %w", MaxPushBridge, ErrInvalid)
		}
	}
	return nil
}

// ValidatePushPage checks a state and page size passed to the readers.
func ValidatePushPage(state PushState, limit int) error {
	if !state.Valid() {
		return fmt.Errorf("push state %q is not a push state: %w", state, ErrInvalid)
	}
	if limit <= 0 || limit > MaxPushPage {
		return fmt.Errorf("limit %d is outside 1..%d: %w", limit, MaxPushPage, ErrInvalid)
	}
	return nil
}

// AllClients, as the client of PushesByKey, names every client's pushes.
// No push's Client may be AllClients.
const AllClients = "*"

// MaxIdempotencyKey bounds the key of ClaimIdempotencyKey, bytes.
const MaxIdempotencyKey = 255

// ValidateIdempotencyClaim checks a claim passed to ClaimIdempotencyKey
// (or, with ttl 1, to ReleaseIdempotencyKey).
func ValidateIdempotencyClaim(client, key string, id uuid.UUID, ttl time.Duration) error {
	switch {
	case len(client) > MaxPushField || client == AllClients:
		return fmt.Errorf("idempotency claim: client of %d bytes: %w", len(client), ErrInvalid)
	case key == "" || len(key) > MaxIdempotencyKey:
		return fmt.Errorf("idempotency claim: key of %d bytes, not 1..%d: %w", len(key), MaxIdempotencyKey, ErrInvalid)
	case id == uuid.Nil:
		return fmt.Errorf("idempotency claim: the nil UUID: %w", ErrInvalid)
	case ttl < time.Second || ttl > MaxPushTTL*time.Second:
		return fmt.Errorf("idempotency claim: ttl %s outside 1s..%ds: %w", ttl, MaxPushTTL, ErrInvalid)
	}
	return nil
}

// ValidateKeyPage checks the client, push key and page size passed to
// PushesByKey.
func ValidateKeyPage(client, pushKey string, limit int) error {
	switch {
	case len(client) > MaxPushField:
		return fmt.Errorf("client of %d bytes, over %d: %w", len(client), MaxPushField, ErrInvalid)
	case pushKey == "" || len(pushKey) > MaxPushField:
		return fmt.Errorf("push key of %d bytes, not 1..%d: %w", len(pushKey), MaxPushField, ErrInvalid)
	case limit <= 0 || limit > MaxPushPage:
		return fmt.Errorf("limit %d is outside 1..%d: %w", limit, MaxPushPage, ErrInvalid)
	}
	return nil
}

// MaxOpenCount bounds CountOpen's limit: a count reads up to that many
// index entries.
const MaxOpenCount = 100_000

// ValidateOpenCount checks the client and limit passed to CountOpen.
func ValidateOpenCount(client string, limit int) error {
	switch {
	case len(client) > MaxPushField || client == AllClients:
		return fmt.Errorf("client of %d bytes: %w", len(client), ErrInvalid)
	case limit <= 0 || limit > MaxOpenCount:
		return fmt.Errorf("limit %d is outside 1..%d: %w", limit, MaxOpenCount, ErrInvalid)
	}
	return nil
}

// PushExpired reports whether a push written with ttl at updated (ms) has
// expired at now.
func PushExpired(updated, ttl int64, now time.Time) bool {
	return ttl > 0 && now.UnixMilli() >= updated+ttl*1000
}

// PushStore is the part of Store the outbound sender uses: pushes with
// their state, due time and attempt log, indexed by (state, time) so that
// the sender's jobs read bounded portions of due pushes and never scan
// them all. Every method is safe for concurrent use. Costs are stated as
// for Store ("RT"); the scylla backend's conditional writes are
// lightweight transactions (LWT, four round trips between replicas).
type PushStore interface {
	// SavePush stores a new push (Version 1) and its index entry,
	// durably, before it returns. The id must be new (the sender makes a
	// fresh v7 UUID). Saving an id that exists never changes the stored
	// push, so a retried create is harmless: a backend refuses it with
	// ErrConflict (embedded) or lets the stored push win (scylla: a plain
	// write below every later change, so not a lightweight transaction).
	// 1 RT (scylla: 2, the index entry and the push).
	SavePush(ctx context.Context, p Push) error

	// GetPush returns the push with its attempt log, or ErrNotFound
	// (also once its TTL has passed). 1 RT.
	GetPush(ctx context.Context, id uuid.UUID) (Push, error)

	// UpdatePush replaces the push with next, which must have the same
	// ID and Version prev.Version+1, only if the stored version is still
	// prev.Version (a compare-and-set), and moves its index entry from
	// (prev.State, prev.At) to (next.State, next.At). When the stored
	// version differs (another node claimed or changed it) nothing is
	// written and ErrConflict is returned; a missing push is ErrNotFound.
	// An update whose outcome is unknown (a timeout) is settled before
	// returning where the backend can, so ErrConflict never means "my own
	// write applied". Embedded: 1 RT. Scylla: an LWT, plus two index
	// writes when State or At change.
	UpdatePush(ctx context.Context, prev *Push, next Push) error

	// UpdatePushes makes each update as UpdatePush would, each on its
	// own: one whose stored version differs (ErrConflict), that is
	// missing (ErrNotFound) or invalid (ErrInvalid) changes nothing and
	// fails alone. It returns one error per update, in order, nil where
	// it applied; at most MaxPushBatch updates. A stopping sender node
	// hands its queue back this way, in far fewer round trips than an
	// UpdatePush each. Embedded: 1 RT. Scylla: the new index entries in
	// a few batches, an LWT per push (many at once), the old entries'
	// deletes in a few batches.
	UpdatePushes(ctx context.Context, updates []PushUpdate) []error

	// DuePushes returns up to limit pushes in state whose At <= before
	// (ms), the oldest At first. It reads only index entries that are
	// due, so its cost is bounded by limit, never by how many pushes
	// exist. 1 RT (scylla: one per index shard, in parallel, then one
	// read per push, in parallel).
	DuePushes(ctx context.Context, state PushState, before int64, limit int) ([]Push, error)

	// ListPushes pages through the pushes in state for operators, in the
	// index's order (by At within a shard). Pass "" for the first page
	// and the returned cursor for the next; "" back means no more. The
	// cursor is opaque and only valid for the same state. It names the
	// last entry read, which may be a push the caller must not show (the
	// push API seals it before a client sees it: apitier/pushapi).
	ListPushes(ctx context.Context, state PushState, cursor string, limit int) ([]Push, string, error)

	// PushesByKey pages through the pushes of client to the device (or
	// user) key pushKey, newest first (by Created, then id). Client
	// AllClients pages through every client's, bridged pushes (client "")
	// included. Pass "" for the first page and the returned cursor (as
	// ListPushes's, opaque and naming the last entry read) for the next;
	// "" back means no more. A page may hold fewer than limit
	// pushes (entries whose push expired are skipped) while more follow.
	// SavePush writes the index entries (under the push's client and under
	// AllClients) with the push; when UpdatePush finishes a push with a
	// TTL they take that TTL, so they expire with it. 1 RT plus a read
	// per push (scylla: the reads in parallel).
	PushesByKey(ctx context.Context, client, pushKey, cursor string, limit int) ([]Push, string, error)

	// CountOpen counts the client's pushes not yet final (SCHEDULED,
	// PENDING, IN_MEMORY, RETRY), up to limit: it returns limit when
	// there are that many or more. SavePush adds a push to the client's
	// open index, UpdatePush removes it when it makes the push final, so
	// the cost is bounded by limit, never by the client's finished
	// pushes. 1 RT (scylla: one per shard of the client's index, in
	// parallel). Scylla's entries live a week at most, so a push open for
	// longer is not counted there (and an entry whose delete a replica
	// lost stops counting after that long).
	CountOpen(ctx context.Context, client string, limit int) (int, error)

	// ClaimIdempotencyKey stores (client, key) -> id for ttl, unless the
	// pair is stored already (and not expired), and returns the id stored:
	// id itself when this call stored it, the first claimer's otherwise.
	// Of concurrent claims of one pair exactly one stores its id, and
	// every one returns it. Pairs of different clients never collide.
	// Embedded: 1 RT. Scylla: an LWT (INSERT ... IF NOT EXISTS), whose
	// unknown outcome (a timeout) is settled by a serial read.
	ClaimIdempotencyKey(ctx context.Context, client, key string, id uuid.UUID, ttl time.Duration) (uuid.UUID, error)

	// ReleaseIdempotencyKey removes (client, key) if it still names id: a
	// claimer whose push was not stored frees the key for a retry.
	// Nothing happens when the pair names another id or is gone.
	// Embedded: 1 RT. Scylla: an LWT (DELETE ... IF id = ?).
	ReleaseIdempotencyKey(ctx context.Context, client, key string, id uuid.UUID) error

	// GetRateShares returns the account's rate shares: Version 0 and no
	// nodes when none are stored. 1 RT (scylla: at SERIAL consistency's
	// partner, so it sees every committed change).
	GetRateShares(ctx context.Context, account string) (RateShares, error)

	// PutRateShares stores next (Version prev+1) only if the stored
	// version is still prev (0: none stored yet): a compare-and-set.
	// Otherwise nothing is written and ErrConflict is returned. As with
	// UpdatePush, ErrConflict never means "my own write applied".
	// Embedded: 1 RT. Scylla: an LWT.
	PutRateShares(ctx context.Context, prev int64, next RateShares) error
}

// PushUpdate is one compare-and-set of UpdatePushes: Next over Prev, as
// UpdatePush(ctx, Prev, Next).
type PushUpdate struct {
	Prev *Push
	Next Push
}

// MaxPushBatch bounds the updates of one UpdatePushes call.
const MaxPushBatch = 1000

// ValidatePushUpdate checks an update passed to UpdatePush or
// UpdatePushes: next valid, and prev's id one version on.
func ValidatePushUpdate(prev *Push, next *Push) error {
	if err := ValidatePush(next); err != nil {
		return err
	}
	if prev == nil || next.ID != prev.ID || next.Version != prev.Version+1 {
		return fmt.Errorf("next must be prev's id one version on: %w", ErrInvalid)
	}
	return nil
}

// RateShares is one provider account's rate divided among the sender nodes
// that send through it: a small record every node reads and changes by
// compare-and-set, about once a second (the sender's shares,
// sender/ratelimit.NodeShare, docs/sender.md).
type RateShares struct {
	// Account names the provider account ("swrve").
	Account string
	// Version counts the record's writes: 0 when none is stored.
	Version int64
	// Nodes are the nodes' entries, at most MaxRateShareNodes.
	Nodes []RateShare
}

// RateShare is one node's entry: how many parts of the account's rate it
// may use, until when.
type RateShare struct {
	Node string `json:"node"`
	// Parts of the account's rate the node may be using (of the sender's
	// fixed number of parts).
	Parts int `json:"parts"`
	// Until, ms since the epoch, is when the entry lapses unless renewed.
	Until int64 `json:"until"`
}

// Bounds of a RateShares record every backend enforces.
const (
	MaxRateShareNodes = 1000
	MaxRateShareParts = 1 << 20
)

// ValidateRateShares checks a record passed to PutRateShares.
func ValidateRateShares(r *RateShares) error {
	switch {
	case r.Account == "" || len(r.Account) > MaxPushField:
		return fmt.Errorf("rate shares account of %d bytes: %w", len(r.Account), ErrInvalid)
	case r.Version < 1:
		return fmt.Errorf("rate shares version %d is not positive: %w", r.Version, ErrInvalid)
	case len(r.Nodes) > MaxRateShareNodes:
		return fmt.Errorf("rate shares of %d nodes, over %d: %w", len(r.Nodes), MaxRateShareNodes, ErrInvalid)
	}
	seen := map[string]bool{}
	for _, n := range r.Nodes {
		if n.Node == "" || len(n.Node) > MaxPushField || seen[n.Node] || n.Parts < 0 || n.Parts > MaxRateShareParts {
			return fmt.Errorf("rate share of node %q (%d parts) is empty, repeated or out of bounds: %w", n.Node, n.Parts, ErrInvalid)
		}
		seen[n.Node] = true
	}
	return nil
}
