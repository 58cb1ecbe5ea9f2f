package session

import (
	"github.com/autopush-go/autopush/internal/protocol"
	"github.com/autopush-go/autopush/storage"
)

// JobKind names the storage work a transition asks for.
type JobKind uint8

// Jobs and what their Result carries back.
const (
	// JobHello looks up the client's UAID, records the connection at
	// ConnectedAt, and has a connection of the user agent on another node
	// evicted. A missing or non-webpush record gets a fresh uaid (Fresh)
	// and nothing is written: the first register writes its record. A
	// hello without a uaid asks for no job. Result: UAID, Cursor, Fresh.
	JobHello JobKind = iota + 1
	// JobRegister mints the endpoint for CHID (with the VAPID Key, if
	// any) and adds the channel; for a NewUser it writes the router
	// record of the connection at ConnectedAt with the channel, in one
	// write. With MaxChannels set (never for a NewUser: it has none) it
	// first counts the user's channels up to that limit, and at the limit
	// adds nothing.
	// Result: Endpoint; with MaxChannels, Channels and Full.
	JobRegister
	// JobUnregister removes the channel CHID.
	JobUnregister
	// JobCheck reads up to Page stored messages: topic messages first,
	// then timestamp messages after Cursor. It must wait for deletes of
	// this user's acked messages still running on the node. Result:
	// Topics, Stamps, More.
	JobCheck
	// JobDelete deletes the acked stored message Message. The node must
	// count it as running for the user until it ends (see JobCheck).
	JobDelete
	// JobCursor advances the user's read cursor to Cursor. No Result.
	JobCursor
	// JobDrop drops the user UAID: router record, channels and stored
	// messages (it passed Config.MsgLimit). Result: Err.
	JobDrop
	// JobHealth asks storage whether it can serve, for a plain HTTP
	// health check on the public port (Route). Result: Err.
	JobHealth
	// JobFate records that the tracked message Fate reached State
	// (written to the client, or acked: storage.FateStore). No Result.
	JobFate
)

// Job is one piece of storage work, run off the event loop.
type Job struct {
	Kind        JobKind
	UAID        [16]byte
	ConnectedAt int64 // hello; register of a NewUser
	NewUser     bool  // register: the uaid is fresh, its router record unwritten
	CHID        [16]byte
	ChannelID   string // register, unregister: as the client wrote it, for the reply
	Key         []byte // register: the raw VAPID public key, or nil
	MaxChannels int    // register: count the channels first, up to this
	Cursor      uint64 // check, cursor
	Page        int    // check
	Message     storage.MessageKey
	// hello: the broadcasts the client named (copies), subscribed when
	// the hello is done; not storage work, they ride along to helloDone.
	Broadcasts []protocol.Broadcast
	Route      string // health: "__heartbeat__" or "health"
	// Tracked: delete of a tracked message, whose fate the ack settles
	// (Fate); fate: the message and the state it reached, or the
	// messages of a page (Fates).
	Tracked bool
	Fate    storage.FateID
	Fates   []storage.FateID
	State   storage.FateState
}

// Result is what a Job found; Session.Done takes it on the session's loop.
type Result struct {
	Job Job
	Err error

	UAID   [16]byte // hello: the uaid the connection now has
	Cursor uint64   // hello: its read cursor
	Fresh  bool     // hello: the uaid was assigned now

	Endpoint string // register
	Channels int    // register with MaxChannels: the channels counted
	Full     bool   // register with MaxChannels: at the limit, not added

	Topics, Stamps []storage.Message // check
	More           bool              // check: the page was full
}

// Leave is the work a closed registered connection leaves behind: store
// its unacked direct notifications (their sender was told they were
// delivered), clear the router record's node_id if it still names this
// connection, and, when something was stored, tell whichever node holds
// the user agent now to check storage.
type Leave struct {
	UAID        [16]byte
	ConnectedAt int64
	Keep        []storage.Message
}

// Done takes the result of a Job the session asked for.
func (s *Session) Done(x *Ctx, r *Result) {
	// A closing connection writes nothing more; what it read stays stored.
	switch {
	case s.state >= stClosing:
		return
	case s.state == stGoingAway:
		// Nothing more is written: only the deletes the client's close
		// waits for still matter (goingAway).
		if r.Job.Kind == JobDelete {
			s.deleteDone(x)
		}
		return
	case r.Job.Kind == JobHealth:
		if s.state == stAnswering {
			s.healthDone(x, r)
		}
		return
	}
	switch r.Job.Kind {
	case JobHello:
		s.helloDone(x, r)
	case JobRegister:
		s.registerDone(x, r)
	case JobUnregister:
		s.unregisterDone(x, r)
	case JobCheck:
		s.checkDone(x, r)
	case JobDelete:
		s.deleteDone(x)
	case JobDrop:
		s.dropDone(x, r)
	}
}
