package scylla

import (
	"sync/atomic"
	"time"

	"github.com/gocql/gocql"
)

// opClass is the class of operation a statement belongs to; each class has
// its own consistency level (Config, docs/storage.md).
type opClass uint8

const (
	classRead         opClass = iota // every SELECT but the serial reads
	classRouterWrite                 // the router record, channels, a user's drop
	classMessageWrite                // messages, acks, cursor, broadcasts, the sender's tables
	numClasses
)

func (c opClass) String() string {
	switch c {
	case classRead:
		return "read"
	case classRouterWrite:
		return "router write"
	case classMessageWrite:
		return "message write"
	}
	return "unknown"
}

// A statement is a CQL statement and its class. Only Store.query and
// Store.batch execute them, at the class's level, so no statement can run
// at another level by accident.
type statement struct {
	cql   string
	class opClass
	// lwt: a conditional write (IF ...). Its Paxos phase runs at
	// LOCAL_SERIAL, its commit at its class's level; it is never
	// speculated, and the driver tries it again only after an error the
	// server answered (a timeout among them): a retry of one that applied
	// finds its own write, which its caller must tell from another's (a
	// serial read, as it settles an unknown outcome).
	lwt bool
	// once: a write that must not be repeated (a counter increment):
	// neither speculated nor tried again unless it certainly did not run
	// (onceRetry).
	once bool
}

// statements lists every statement the constructors below made, for the
// tests that check each one's class against its CQL.
var statements []statement

func newStatement(cql string, class opClass, lwt bool) statement {
	s := statement{cql: cql, class: class, lwt: lwt, once: lwt}
	statements = append(statements, s)
	return s
}

func read(cql string) statement         { return newStatement(cql, classRead, false) }
func routerWrite(cql string) statement  { return newStatement(cql, classRouterWrite, false) }
func messageWrite(cql string) statement { return newStatement(cql, classMessageWrite, false) }

// counterWrite is a counter increment (fate_count): not idempotent.
func counterWrite(cql string) statement {
	s := newStatement(cql, classMessageWrite, false)
	statements[len(statements)-1].once = true
	s.once = true
	return s
}

// messageLWT is a conditional message write (the sender's tables).
func messageLWT(cql string) statement { return newStatement(cql, classMessageWrite, true) }

// speculation is the SpeculativeExecutionPolicy of reads: Config's
// attempts and delay, but never more extra executions than there are
// nodes up besides the one the first execution takes. gocql's executor
// returns the first execution to finish even when it failed, and an
// execution that finds no host fails at once (ErrNoConnections, also
// apache/cassandra-gocql-driver#1707), so on a cluster with one node up
// every read slower than the delay would fail. gocql asks Attempts() as
// each read starts.
type speculation struct {
	attempts int
	delay    time.Duration
	// upHosts counts the nodes the driver holds up; it is called at most
	// once per upRefresh.
	upHosts func() int
	up      atomic.Int64 // last count
	counted atomic.Int64 // when, Unix ns; 0: never
}

// upRefresh is how stale speculation's count of nodes up may be: a node
// lost is known to the driver within about a second anyway (a failed
// connection marks it down), and a stale count costs at most one delay's
// worth of reads failed by a speculative execution that found no node.
const upRefresh = time.Second

func newSpeculation(attempts int, delay time.Duration, upHosts func() int) *speculation {
	return &speculation{attempts: attempts, delay: delay, upHosts: upHosts}
}

// sessionUpHosts counts the nodes of session the driver holds up.
func sessionUpHosts(session *gocql.Session) func() int {
	return func() int {
		n := 0
		for _, h := range session.GetHosts() {
			if h.IsUp() {
				n++
			}
		}
		return n
	}
}

// Attempts implements gocql.SpeculativeExecutionPolicy.
func (s *speculation) Attempts() int {
	now := time.Now().UnixNano()
	if last := s.counted.Load(); last == 0 || now-last >= int64(upRefresh) {
		s.up.Store(int64(s.upHosts()))
		s.counted.Store(now)
	}
	return int(max(0, min(int64(s.attempts), s.up.Load()-1)))
}

// Delay implements gocql.SpeculativeExecutionPolicy.
func (s *speculation) Delay() time.Duration { return s.delay }
