package storage

import (
	"context"
	"crypto/sha256"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
)

// Fates: what became of a tracked message (docs/receipts.md). A push is
// tracked when the operator marks its VAPID key for milestones
// (tracking-keys) or when its application server asked for a receipt
// (Push-Receipt). Each tracked message has one fate record, keyed by its
// user agent and its FateID, that moves through non-terminal states and
// ends in exactly one terminal state: the first Settle wins, every later
// one changes nothing. The backends count every state a fate reaches
// (milestones), durably and summed over every node, and write a receipt
// for a settled fate that names a receipt subscription. Nothing about the
// user, the subscription or the content is counted.

// FateState is a milestone of a tracked message.
type FateState uint8

// The milestones. Received, Stored, NodeTransmitted and Transmitted may be
// reached several times (a message stored, sent, left unacked and stored
// again); the others are terminal.
const (
	// FateReceived: the API tier accepted it (201).
	FateReceived FateState = iota + 1
	// FateStored: written to storage for a user agent not connected (or
	// left unacked by one that went away).
	FateStored
	// FateNodeTransmitted: the connection node holding the user agent took
	// it for direct delivery.
	FateNodeTransmitted
	// FateTransmitted: written to the user agent's websocket.
	FateTransmitted
	// FateDelivered: the user agent acked it. Terminal.
	FateDelivered
	// FateExpired: its TTL passed before an ack (or TTL 0 found no live
	// user agent). Terminal.
	FateExpired
	// FateDropped: removed before delivery, for a DropReason. Terminal.
	FateDropped
	// FateBridgeTransmitted: handed to a bridge provider (FCM, APNs), which
	// confirms no delivery. Terminal.
	FateBridgeTransmitted
	// FateErrored: a bridge provider refused it, or the sender gave up.
	// Terminal.
	FateErrored
)

// FateStates lists every state in order.
var FateStates = []FateState{FateReceived, FateStored, FateNodeTransmitted, FateTransmitted,
	FateDelivered, FateExpired, FateDropped, FateBridgeTransmitted, FateErrored}

var fateNames = [...]string{"", "received", "stored", "node_transmitted", "transmitted",
	"delivered", "expired", "dropped", "bridge_transmitted", "errored"}

// String is the state's name in metrics, milestones and receipts.
func (s FateState) String() string {
	if int(s) < len(fateNames) {
		return fateNames[s]
	}
	return fmt.Sprintf("fate(%d)", uint8(s))
}

// Valid reports whether s is one of FateStates.
func (s FateState) Valid() bool { return s >= FateReceived && s <= FateErrored }

// Terminal reports whether a fate in s never changes again.
func (s FateState) Terminal() bool { return s >= FateDelivered && s <= FateErrored }

// DropReason says why a FateDropped message was removed.
type DropReason uint8

// The reasons.
const (
	DropNone DropReason = iota
	// DropUnsubscribed: its channel was unsubscribed.
	DropUnsubscribed
	// DropTopicReplaced: a newer message with the same Topic replaced it
	// in storage (RFC 8030 §5.4: no delivery receipt).
	DropTopicReplaced
	// DropMsgLimit: the user agent was reset for passing the message
	// limit, and its stored messages with it.
	DropMsgLimit
	// DropUserGone: the user agent's record was removed (a bridge's
	// device token is gone, or the user was dropped).
	DropUserGone
	// DropWithdrawn: its application server deleted it (DELETE of its
	// Location) while it was stored, or queued for a bridge provider.
	DropWithdrawn
)

// DropReasons lists every reason but DropNone.
var DropReasons = []DropReason{DropUnsubscribed, DropTopicReplaced, DropMsgLimit, DropUserGone, DropWithdrawn}

var dropNames = [...]string{"", "unsubscribed", "topic_replaced", "msg_limit", "user_gone", "withdrawn"}

// String is the reason's name.
func (r DropReason) String() string {
	if int(r) < len(dropNames) {
		return dropNames[r]
	}
	return fmt.Sprintf("reason(%d)", uint8(r))
}

// Milestone names one count: a state, and for FateDropped its reason.
type Milestone struct {
	State  FateState
	Reason DropReason
}

// String is "state" or "dropped_reason".
func (m Milestone) String() string {
	if m.State == FateDropped {
		return m.State.String() + "_" + m.Reason.String()
	}
	return m.State.String()
}

// Milestones lists every count a backend keeps, in order.
func Milestones() []Milestone {
	var out []Milestone
	for _, s := range FateStates {
		if s == FateDropped {
			for _, r := range DropReasons {
				out = append(out, Milestone{s, r})
			}
			continue
		}
		out = append(out, Milestone{State: s})
	}
	return out
}

// FateID names one tracked message of a user agent: derived from the
// message id the application server got (NewFateID), so it survives the
// sort key a message left unacked gets when stored again.
type FateID [16]byte

// NewFateID is the FateID of the message with message id (Version) version.
func NewFateID(version string) FateID {
	sum := sha256.Sum256([]byte(version))
	var id FateID
	copy(id[:], sum[:16])
	return id
}

// ReceiptSubID names a receipt subscription (RFC 8030 §5.1).
type ReceiptSubID [16]byte

// Fate is the record of one tracked message.
type Fate struct {
	UAID uuid.UUID
	ID   FateID
	CHID uuid.UUID
	// Topic of a topic message, else "".
	Topic string
	// MessageID is the id the application server got in the push's
	// Location (/m/{MessageID}); receipts name it. At most MaxVersionLen.
	MessageID string
	// Expiry is when the message stops being deliverable; a fate still
	// unsettled then is settled FateExpired by SettleExpired (after
	// FateAckGrace when InHands).
	Expiry time.Time
	// Receipt is the receipt subscription to write its receipt to; zero:
	// none (milestones only).
	Receipt ReceiptSubID
	// State and Reason: where it is (read back by GetFate).
	State  FateState
	Reason DropReason
}

// Receipt is what a receipt subscription reads about one settled message.
type Receipt struct {
	// ID orders and acknowledges the receipt within its subscription
	// (opaque, unique, at most 64 bytes of [A-Za-z0-9_-]).
	ID        string
	MessageID string
	State     FateState // terminal
	Reason    DropReason
	// At is when the fate was settled.
	At time.Time
}

// ReceiptSub is a receipt subscription: receipts of pushes that named it,
// readable only with the VAPID key that created it.
type ReceiptSub struct {
	ID ReceiptSubID
	// KeyHash is sha256 of the raw VAPID public key that created it.
	KeyHash [32]byte
	// Webhook, when set, is the URL the receipts are POSTed to as well
	// (apitier/receipts); WebhookSecret keys their signature.
	Webhook       string
	WebhookSecret string
	Created       time.Time
}

// Bounds of a receipt subscription's webhook.
const (
	MaxWebhookLen       = 2048
	MaxWebhookSecretLen = 128
)

// ValidateReceiptSub checks sub for PutReceiptSub.
func ValidateReceiptSub(sub *ReceiptSub) error {
	switch {
	case sub.ID == ReceiptSubID{}:
		return fmt.Errorf("%w: receipt subscription with a zero id", ErrInvalid)
	case len(sub.Webhook) > MaxWebhookLen || len(sub.WebhookSecret) > MaxWebhookSecretLen:
		return fmt.Errorf("%w: receipt subscription webhook of %d bytes, secret of %d", ErrInvalid, len(sub.Webhook), len(sub.WebhookSecret))
	case sub.Webhook != "" && !strings.HasPrefix(sub.Webhook, "https://") && !strings.HasPrefix(sub.Webhook, "http://"):
		return fmt.Errorf("%w: receipt subscription webhook is not an http(s) URL", ErrInvalid)
	}
	return nil
}

// FateStore keeps fates, milestone counts and receipts. Costs are as in
// Store; "CAS" is a conditional write (a lightweight transaction on CQL).
type FateStore interface {
	// Track writes the fate f (State must be FateReceived) with its expiry
	// entry, and counts FateReceived. Tracking an id twice is ErrConflict
	// and changes nothing. 1 RT (a CAS on CQL).
	Track(ctx context.Context, f Fate) error

	// Reach moves the fate (uaid, id) to the non-terminal state s
	// (FateStored, FateNodeTransmitted or FateTransmitted: received is
	// Track's alone, so that received counts each message once) and
	// counts s. A settled fate stays as it is and reports false, but s
	// is still counted: the message did reach it, and only its record
	// came after the ack or drop that settled it. A missing fate reports
	// false and counts nothing. It may return before the write is durable (the
	// embedded backend does not sync it: its next synced write does): a
	// crash may lose an intermediate milestone, never a settlement.
	// 1 RT plus a read.
	Reach(ctx context.Context, uaid uuid.UUID, id FateID, s FateState) (bool, error)

	// Settle moves the fate (uaid, id) to the terminal state s (reason:
	// FateDropped's, else DropNone) unless it is settled already: of all
	// the Settle calls on one fate, exactly one reports true. The winner
	// counts s and, when the fate names a receipt subscription, writes
	// its receipt. A missing fate reports false. 1 CAS plus the count and
	// receipt writes.
	Settle(ctx context.Context, uaid uuid.UUID, id FateID, s FateState, reason DropReason) (bool, error)

	// ReachAll is Reach of each of ids (distinct: a page's messages), all
	// to s; it returns how many moved. The embedded backend writes them all at once, unsynced as
	// Reach; on CQL they are Reach's one by one.
	ReachAll(ctx context.Context, uaid uuid.UUID, ids []FateID, s FateState) (int, error)

	// DeleteDelivered is what an ack of a tracked stored message does:
	// DeleteMessage of k, then Settle of the fate (uaid, id) as
	// FateDelivered, whose report it returns. The embedded backend makes
	// both one durable write (one sync where the two calls take two); on
	// CQL they are the two calls.
	DeleteDelivered(ctx context.Context, uaid uuid.UUID, k MessageKey, id FateID) (bool, error)

	// SettleUser settles FateDropped with reason every unsettled fate of
	// uaid, or only those of channel chid when chid is not uuid.Nil.
	// Returns how many this call settled. 1 RT to read, 1 Settle each.
	SettleUser(ctx context.Context, uaid, chid uuid.UUID, reason DropReason) (int, error)

	// SettleTopic settles FateDropped/DropTopicReplaced every fate of
	// (uaid, chid, topic) still FateReceived or FateStored, other than
	// keep: a message with that topic was just stored over them. Returns
	// how many. 1 RT to read, 1 Settle each.
	SettleTopic(ctx context.Context, uaid, chid uuid.UUID, topic string, keep FateID) (int, error)

	// SettleExpired settles FateExpired up to limit unsettled fates whose
	// Expiry is before now, oldest first, and forgets the expiry entries
	// it went past. A fate whose message may still reach its user agent
	// (InHands: FateReceived, FateNodeTransmitted, FateTransmitted) gets
	// FateAckGrace more for its ack: its Expiry moves on by that once,
	// and it settles expired only if it is still unsettled then. A stored
	// fate expires at once. Any number of nodes may call it at once: each
	// fate still settles once. Returns how many this call settled.
	SettleExpired(ctx context.Context, now time.Time, limit int) (int, error)

	// GetFate returns the fate (uaid, id), settled or not, while it is
	// kept (a settled fate is kept at least a day); ErrNotFound otherwise.
	// 1 RT.
	GetFate(ctx context.Context, uaid uuid.UUID, id FateID) (Fate, error)

	// MilestoneCounts returns how many times each milestone was reached,
	// summed over every node and kept across restarts. Every Milestones()
	// entry is present. 1 RT.
	MilestoneCounts(ctx context.Context) (map[Milestone]int64, error)

	// LiveCounts returns how many tracked messages are in each state
	// now, summed over every node: for each non-terminal state the fates
	// in it (a gauge: a move takes one from the state it left and adds
	// one to the state it reached, in the write that moves it), and for
	// each terminal state the fates settled in it (its milestone count:
	// a settled fate stays settled). Every FateStates entry is present.
	// Fates tracked by a version that did not keep these counts are
	// missing from them, and their moves take their states' counts below
	// what they should be (below zero when nothing else is in them). On
	// CQL a count that could not be written is lost as a milestone count
	// is (LostMilestoneCounts). 1 RT.
	LiveCounts(ctx context.Context) (map[FateState]int64, error)

	// PutReceiptSub creates the receipt subscription sub; ErrConflict if
	// its id exists. 1 RT.
	PutReceiptSub(ctx context.Context, sub ReceiptSub) error
	// GetReceiptSub returns the subscription id, or ErrNotFound. 1 RT.
	GetReceiptSub(ctx context.Context, id ReceiptSubID) (ReceiptSub, error)
	// Receipts returns up to limit unacknowledged receipts of sub, oldest
	// first. 1 RT.
	Receipts(ctx context.Context, sub ReceiptSubID, limit int) ([]Receipt, error)
	// AckReceipts removes the receipts ids of sub; unknown ids are
	// ignored. 1 RT.
	AckReceipts(ctx context.Context, sub ReceiptSubID, ids []string) error
	// ReceiptHooks lists up to limit (> 0) receipt subscriptions that
	// have a webhook, in id order, from the first after after (the zero
	// id: from the start). 1 RT.
	ReceiptHooks(ctx context.Context, after ReceiptSubID, limit int) ([]ReceiptSub, error)
	// CountReceiptHooks counts the receipt subscriptions with a webhook
	// that the VAPID key whose sha256 is key created, stopping at limit
	// (> 0): the result is min(their number, limit). Subscriptions made
	// by a version before this count was kept are not counted. It reads
	// at most limit index keys: 1 RT.
	CountReceiptHooks(ctx context.Context, key [32]byte, limit int) (int, error)
}

// Retention of fate records and receipts past settling.
const (
	// FateKeep is how long a settled fate stays readable by GetFate.
	FateKeep = 24 * time.Hour
	// ReceiptKeep is how long an unacknowledged receipt is kept.
	ReceiptKeep = 7 * 24 * time.Hour
	// FateAckGrace is how long past its TTL a message on its way to a
	// user agent may still be acked (SettleExpired): a message sent just
	// before its expiry and acked just after it was delivered.
	FateAckGrace = 30 * time.Second
)

// InHands reports whether a fate in s is in the hands of a tier, on its
// way to its user agent: received (the endpoint node is storing it or
// handing it to a connection node: a TTL 0 push expires as it is
// tracked, before its node records its delivery), with a connection
// node, or written to the user agent. Its ack may still come
// (FateAckGrace). A stored fate is not: it waits for its user agent.
func InHands(s FateState) bool {
	return s == FateReceived || s == FateNodeTransmitted || s == FateTransmitted
}

// ValidateFate checks f for Track.
func ValidateFate(f *Fate) error {
	switch {
	case f.UAID == uuid.Nil || f.CHID == uuid.Nil:
		return fmt.Errorf("%w: fate without uaid or chid", ErrInvalid)
	case f.State != FateReceived:
		return fmt.Errorf("%w: a fate starts received, not %s", ErrInvalid, f.State)
	case f.MessageID == "" || len(f.MessageID) > MaxVersionLen:
		return fmt.Errorf("%w: fate message id of %d bytes", ErrInvalid, len(f.MessageID))
	case len(f.Topic) > MaxTopicLen:
		return fmt.Errorf("%w: fate topic of %d bytes", ErrInvalid, len(f.Topic))
	case f.Expiry.IsZero():
		return fmt.Errorf("%w: fate without expiry", ErrInvalid)
	}
	return nil
}

// ValidateReach checks Reach's state.
func ValidateReach(s FateState) error {
	if s != FateStored && s != FateNodeTransmitted && s != FateTransmitted {
		return fmt.Errorf("%w: reach %s (stored, node_transmitted or transmitted only)", ErrInvalid, s)
	}
	return nil
}

// ValidateSettle checks Settle's state and reason.
func ValidateSettle(s FateState, reason DropReason) error {
	switch {
	case !s.Terminal():
		return fmt.Errorf("%w: settle to non-terminal %s", ErrInvalid, s)
	case (s == FateDropped) != (reason != DropNone) || int(reason) >= len(dropNames):
		return fmt.Errorf("%w: state %s with reason %s", ErrInvalid, s, reason)
	}
	return nil
}
