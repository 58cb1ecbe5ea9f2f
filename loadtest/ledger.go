package loadtest

import "sync"

// ledger is one worker's record of every push it sent: what the endpoint
// answered, how often it arrived, and whether and where it was acked.
// Goroutine-safe: senders and event loops share it.
//
// A push that arrives again after an ack is a server bug, unless the ack
// may never have reached the server. An ack is certain once the connection
// it went out on was closed with a completed close handshake: the engine
// reads frames in order, so it handled the ack before answering the close.
// A push arriving again on the very connection that acked it is a bug too.
type ledger struct {
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
	statusNoAnswer = -1 // transport error or timeout
	statusNotSent  = -2 // over the in-flight cap: never sent
)

// receipt classifies one arrival.
type receipt int

const (
	rcptFirst              receipt = iota // first arrival
	rcptAgainUnacked                      // again, never acked: a legitimate redelivery
	rcptAgainAckUnverified                // again, acked on a connection that broke: the ack may be lost
	rcptAfterAck                          // again after a certain ack: a server bug
	rcptUnknown                           // not a push of this ledger
)

// add records a push about to be sent to ua and returns its seq.
func (l *ledger) add(ua int32) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recs = append(l.recs, pushRec{ua: ua})
	l.locs = append(l.locs, "")
	return uint64(len(l.recs) - 1)
}

// answered records the endpoint's status (or statusNoAnswer/NotSent) and
// the Location it named.
func (l *ledger) answered(seq uint64, status int, location string) {
	l.mu.Lock()
	l.recs[seq].status = int16(status)
	l.locs[seq] = location
	l.mu.Unlock()
}

// missingPush is an accepted push that never arrived, or was not acked.
type missingPush struct {
	seq      uint64
	ua       int32
	recv     uint16
	location string
}

// missing lists the accepted pushes that never arrived (or, with
// unacked, were never acked).
func (l *ledger) missing(unacked bool) []missingPush {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []missingPush
	for i, r := range l.recs {
		if r.status == 201 && (r.recv == 0 || unacked && !r.acked) {
			out = append(out, missingPush{seq: uint64(i), ua: r.ua, recv: r.recv, location: l.locs[i]})
		}
	}
	return out
}

// receive classifies an arrival of seq at ua on connection conn.
func (l *ledger) receive(seq uint64, ua int32, conn uint32) receipt {
	l.mu.Lock()
	defer l.mu.Unlock()
	if seq >= uint64(len(l.recs)) || l.recs[seq].ua != ua {
		return rcptUnknown
	}
	r := &l.recs[seq]
	if r.recv < ^uint16(0) {
		r.recv++
	}
	switch {
	case r.recv == 1:
		return rcptFirst
	case !r.acked:
		return rcptAgainUnacked
	case r.confirmed || r.ackConn == conn:
		return rcptAfterAck
	}
	return rcptAgainAckUnverified
}

// ack records that seq was acked on connection conn.
func (l *ledger) ack(seq uint64, conn uint32) {
	l.mu.Lock()
	r := &l.recs[seq]
	if !r.acked {
		r.acked, r.ackConn = true, conn
	}
	l.mu.Unlock()
}

// confirm marks acks as certain (their connection closed cleanly).
func (l *ledger) confirm(seqs []uint64) {
	l.mu.Lock()
	for _, s := range seqs {
		l.recs[s].confirmed = true
	}
	l.mu.Unlock()
}

// outstanding counts pushes in [lo, hi) that are in flight or accepted and
// not yet received.
func (l *ledger) outstanding(lo, hi uint64) int {
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

// unacked counts accepted pushes not acked yet.
func (l *ledger) unacked() int {
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

func (l *ledger) len() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return uint64(len(l.recs))
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

// add sums b into a.
func (a *Accounting) add(b Accounting) {
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

// Exact reports whether every accepted push arrived exactly once as far
// as the server is concerned: none lost, none after a certain ack, none
// garbled or misrouted.
func (a *Accounting) Exact() bool {
	return a.Lost == 0 && a.DuplicatedAfterAck == 0 && a.BadContent == 0 && a.Misrouted == 0 && a.Unknown == 0
}

// account summarises the pushes in [lo, hi); the redelivery counts come
// from the arrivals the worker classified (counted as they happen).
func (l *ledger) account(lo, hi uint64) Accounting {
	l.mu.Lock()
	defer l.mu.Unlock()
	var a Accounting
	for _, r := range l.recs[lo:min(hi, uint64(len(l.recs)))] {
		switch {
		case r.status == statusNotSent:
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
		case r.status == statusNoAnswer:
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
