package session

// Outcome is what a call the endpoint tier or another node makes on a
// session (Deliver, Check, Evict) did. The core knows no HTTP:
// engine/nodeapi.go answers each outcome with its node API status.
type Outcome uint8

// The outcomes. Zero is none of them, so a forgotten result is never
// taken for a delivery.
const (
	// Delivered (Deliver): written into Ctx.Out; the sender stores
	// nothing.
	Delivered Outcome = iota + 1
	// Busy (Deliver): the client is here but takes nothing now (its hello
	// running, its window full, the node draining, storage down); the
	// sender stores the message, and a storage check is owed unless
	// storage is down.
	Busy
	// NotHere (Deliver, Check, Evict): no such client ready here, or it is
	// being dropped; the sender stores the message.
	NotHere
	// Checking (Check): a storage read started now.
	Checking
	// CheckLater (Check): storage is read once what is in flight has
	// drained.
	CheckLater
	// Evicted (Evict): the connection is closing, a newer one exists.
	Evicted
)

func (o Outcome) String() string {
	switch o {
	case Delivered:
		return "delivered"
	case Busy:
		return "busy"
	case NotHere:
		return "not here"
	case Checking:
		return "checking"
	case CheckLater:
		return "check later"
	case Evicted:
		return "evicted"
	}
	return "none"
}
