package ledger

import "sync"

// Ledger is one worker's record of every push it sent: what the endpoint
// answered, how often it arrived, and whether and where it was acked.
// Goroutine-safe: the application server's goroutines and the event
// loops share it.
//
// A push that arrives again after an ack is a server bug, unless the ack
// may never have reached the server. An ack is certain once the connection
// it went out on was closed with a completed close handshake: the engine
// reads frames in order, so it handled the ack before answering the close.
// A push arriving again on the very connection that acked it is a bug too.
type Ledger struct {
	mu   sync.Mutex
	recs []pushRec
	locs []string // the endpoint's Location (message id) per push, for post-mortems
}

// pushRec is one push; seq is its index.
type pushRec struct {
	ua        int32  // local index of the user agent it was addressed to
	status    int16  // the endpoint's answer; 0 while in flight
	recv      uint16 // receipts, saturating
	ackConn   uint32 // connection serial the ack went out on
	acked     bool
	confirmed bool
}

// Statuses besides HTTP ones.
const (
	StatusNoAnswer = -1 // transport error or timeout
	StatusNotSent  = -2 // over the in-flight cap: never sent
)

// Receipt classifies one arrival.
type Receipt int

const (
	First              Receipt = iota // first arrival
	AgainUnacked                      // again, never acked: a legitimate redelivery
	AgainAckUnverified                // again, acked on a connection that broke: the ack may be lost
	AfterAck                          // again after a certain ack: a server bug
	Unknown                           // not a push of this ledger
)

// Add records a push about to be sent to ua and returns its seq.
func (l *Ledger) Add(ua int32) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recs = append(l.recs, pushRec{ua: ua})
	l.locs = append(l.locs, "")
	return uint64(len(l.recs) - 1)
}

// Answered records the endpoint's status (or StatusNoAnswer/NotSent) and
// the Location it named.
func (l *Ledger) Answered(seq uint64, status int, location string) {
	l.mu.Lock()
	l.recs[seq].status = int16(status)
	l.locs[seq] = location
	l.mu.Unlock()
}

// MissingPush is an accepted push that never arrived, or was not acked.
type MissingPush struct {
	Seq      uint64
	UA       int32  // local index of its user agent
	Recv     uint16 // arrivals
	Location string // the endpoint's message id
}

// Missing lists the accepted pushes that never arrived (or, with
// unacked, were never acked).
func (l *Ledger) Missing(unacked bool) []MissingPush {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []MissingPush
	for i, r := range l.recs {
		if r.status == 201 && (r.recv == 0 || unacked && !r.acked) {
			out = append(out, MissingPush{Seq: uint64(i), UA: r.ua, Recv: r.recv, Location: l.locs[i]})
		}
	}
	return out
}

// Receive classifies an arrival of seq at ua on connection conn.
func (l *Ledger) Receive(seq uint64, ua int32, conn uint32) Receipt {
	l.mu.Lock()
	defer l.mu.Unlock()
	if seq >= uint64(len(l.recs)) || l.recs[seq].ua != ua {
		return Unknown
	}
	r := &l.recs[seq]
	if r.recv < ^uint16(0) {
		r.recv++
	}
	switch {
	case r.recv == 1:
		return First
	case !r.acked:
		return AgainUnacked
	case r.confirmed || r.ackConn == conn:
		return AfterAck
	}
	return AgainAckUnverified
}

// Ack records that seq was acked on connection conn.
func (l *Ledger) Ack(seq uint64, conn uint32) {
	l.mu.Lock()
	r := &l.recs[seq]
	if !r.acked {
		r.acked, r.ackConn = true, conn
	}
	l.mu.Unlock()
}

// Confirm marks acks as certain (their connection closed cleanly).
func (l *Ledger) Confirm(seqs []uint64) {
	l.mu.Lock()
	for _, s := range seqs {
		l.recs[s].confirmed = true
	}
	l.mu.Unlock()
}

// Outstanding counts pushes in [lo, hi) that are in flight or accepted and
// not yet received.
func (l *Ledger) Outstanding(lo, hi uint64) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, r := range l.recs[lo:min(hi, uint64(len(l.recs)))] {
		if r.status == 0 || (r.status == 201 && r.recv == 0) {
			n++
		}
	}
	return n
}

// Unacked counts accepted pushes not acked yet.
func (l *Ledger) Unacked() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, r := range l.recs {
		if r.status == 201 && !r.acked {
			n++
		}
	}
	return n
}

// Len is the number of pushes recorded: the next seq.
func (l *Ledger) Len() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return uint64(len(l.recs))
}

// Fates are the accepted pushes of a ledger by their Location (the
// endpoint's name for the message, which its receipt repeats), as the
// user agents saw them: acked, or not (yet).
type Fates struct {
	Acked    []string `json:"acked"`
	NotAcked []string `json:"not_acked"`
}

// Fates lists every accepted push's Location, acked or not.
func (l *Ledger) Fates() Fates {
	l.mu.Lock()
	defer l.mu.Unlock()
	var f Fates
	for i, r := range l.recs {
		switch {
		case r.status != 201:
		case r.acked:
			f.Acked = append(f.Acked, l.locs[i])
		default:
			f.NotAcked = append(f.NotAcked, l.locs[i])
		}
	}
	return f
}

// Accounting is the fate of a set of pushes.
type Accounting struct {
	Sent     int64 `json:"sent"`     // POSTs started
	Accepted int64 `json:"accepted"` // answered 201
	Rejected int64 `json:"rejected"` // answered, not 201
	NoAnswer int64 `json:"no_answer"`
	NotSent  int64 `json:"not_sent"` // over the in-flight cap

	Delivered int64 `json:"delivered"` // accepted and received at least once
	Lost      int64 `json:"lost"`      // accepted and never received
	Unacked   int64 `json:"unacked"`   // accepted, received, never acked
	// DuplicatedAfterAck arrived again after a certain ack: a server bug.
	DuplicatedAfterAck int64 `json:"duplicated_after_ack"`
	// RedeliveredUnacked arrived again before any ack (the user agent
	// was leaving when it first came): allowed.
	RedeliveredUnacked int64 `json:"redelivered_unacked"`
	// RedeliveredAckUnverified arrived again after an ack sent on a
	// connection that then broke, so the server may never have seen it.
	RedeliveredAckUnverified int64 `json:"redelivered_ack_unverified"`
	// DeliveredDespiteError: the POST failed or was refused, yet the push
	// arrived (a timeout after the server took it, say).
	DeliveredDespiteError int64 `json:"delivered_despite_error"`
	// Set by the user agents: arrivals that did not decrypt or check,
	// reached the wrong user agent, or were no push of this run.
	BadContent int64 `json:"bad_content"`
	Misrouted  int64 `json:"misrouted"`
	Unknown    int64 `json:"unknown"`
}

// Add sums b into a.
func (a *Accounting) Add(b Accounting) {
	a.Sent += b.Sent
	a.Accepted += b.Accepted
	a.Rejected += b.Rejected
	a.NoAnswer += b.NoAnswer
	a.NotSent += b.NotSent
	a.Delivered += b.Delivered
	a.Lost += b.Lost
	a.Unacked += b.Unacked
	a.DuplicatedAfterAck += b.DuplicatedAfterAck
	a.RedeliveredUnacked += b.RedeliveredUnacked
	a.RedeliveredAckUnverified += b.RedeliveredAckUnverified
	a.DeliveredDespiteError += b.DeliveredDespiteError
	a.BadContent += b.BadContent
	a.Misrouted += b.Misrouted
	a.Unknown += b.Unknown
}

// Minus is a less b, field by field: what a later accounting of the same
// ledgers added to an earlier one (a phase of a run).
func (a Accounting) Minus(b Accounting) Accounting {
	b.Sent, b.Accepted, b.Rejected, b.NoAnswer, b.NotSent = -b.Sent, -b.Accepted, -b.Rejected, -b.NoAnswer, -b.NotSent
	b.Delivered, b.Lost, b.Unacked, b.DuplicatedAfterAck = -b.Delivered, -b.Lost, -b.Unacked, -b.DuplicatedAfterAck
	b.RedeliveredUnacked, b.RedeliveredAckUnverified, b.DeliveredDespiteError = -b.RedeliveredUnacked, -b.RedeliveredAckUnverified, -b.DeliveredDespiteError
	b.BadContent, b.Misrouted, b.Unknown = -b.BadContent, -b.Misrouted, -b.Unknown
	a.Add(b)
	return a
}

// Exact reports whether every accepted push arrived exactly once as far
// as the server is concerned: none lost, none after a certain ack, none
// garbled or misrouted.
func (a *Accounting) Exact() bool {
	return a.Lost == 0 && a.DuplicatedAfterAck == 0 && a.BadContent == 0 && a.Misrouted == 0 && a.Unknown == 0
}

// Account summarises the pushes in [lo, hi); the redelivery counts come
// from the arrivals the user agents classified (Problems, AddProblems).
func (l *Ledger) Account(lo, hi uint64) Accounting {
	l.mu.Lock()
	defer l.mu.Unlock()
	var a Accounting
	for _, r := range l.recs[lo:min(hi, uint64(len(l.recs)))] {
		switch {
		case r.status == StatusNotSent:
			a.NotSent++
			continue
		case r.status == 201:
			a.Accepted++
			switch {
			case r.recv == 0:
				a.Lost++
			case !r.acked:
				a.Delivered++
				a.Unacked++
			default:
				a.Delivered++
			}
		case r.status == StatusNoAnswer:
			a.NoAnswer++
		case r.status > 0:
			a.Rejected++
		}
		a.Sent++
		if r.status != 201 && r.status != 0 && r.recv > 0 {
			a.DeliveredDespiteError++
		}
	}
	return a
}

// Problems are the arrivals the user agents counted as wrong or repeated.
type Problems struct {
	DupAfterAck, RedelivUnacked, RedelivUnverified, BadContent, Misrouted, Unknown int64
}

// Sub subtracts q from p (the problems of a phase: after less before).
func (p *Problems) Sub(q Problems) {
	p.DupAfterAck -= q.DupAfterAck
	p.RedelivUnacked -= q.RedelivUnacked
	p.RedelivUnverified -= q.RedelivUnverified
	p.BadContent -= q.BadContent
	p.Misrouted -= q.Misrouted
	p.Unknown -= q.Unknown
}

// AddProblems adds the user agents' counts to a.
func (a *Accounting) AddProblems(p Problems) {
	a.DuplicatedAfterAck += p.DupAfterAck
	a.RedeliveredUnacked += p.RedelivUnacked
	a.RedeliveredAckUnverified += p.RedelivUnverified
	a.BadContent += p.BadContent
	a.Misrouted += p.Misrouted
	a.Unknown += p.Unknown
}
