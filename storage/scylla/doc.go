// Package scylla is the storage.Store backend for ScyllaDB and Apache
// Cassandra, through gocql (the scylladb fork, which also speaks to
// Cassandra).
//
// It is for deployments that run several connection and endpoint nodes
// against one shared, replicated database. Single-node deployments use
// storage/embedded instead.
//
// # Design
//
// Tables (schema.cql): router, message and broadcast are the push
// service's; push, push_state, sender_rate, push_by_key, push_open and
// push_idempotency the outbound sender's and its API's (pushes.go,
// pushindex.go); fate, fate_expiry, fate_bucket, fate_count, receipt_sub
// and receipt the fates of tracked messages (fates.go, fatesweep.go,
// receipts.go).
// router holds one partition per user agent,
// whose static columns are the router record and whose clustering rows are
// the subscribed channels, so dropping a user is one partition delete;
// message holds one partition per user agent with topic and timestamp
// messages as clustering rows.
// broadcast holds the broadcast (megaphone) versions in one
// small partition that every connection node reads whole when it polls.
//
// Every ordering rule of the storage contract (newest connection wins, a
// clear never removes a newer connection, the cursor only moves forward, an
// old topic version never replaces or deletes a newer one) is enforced by
// Cassandra's last-write-wins cell reconciliation with explicit write
// timestamps derived from the data (ConnectedAt, SortKey), never by
// lightweight transactions (IF ...): no Paxos round trips, no contention,
// and the outcome is the same whatever order concurrent writes arrive in.
// The timestamp of each cell and the rules that make this work are
// documented on the methods and in timestamps.go.
//
// # Never
//
//   - Never create or alter tables on the hot path: New only checks that the
//     schema exists; ApplySchema (an operator step, or a test) is the only
//     code that runs DDL.
//   - Never use lightweight transactions on router or message, nor logged
//     batches anywhere: batches are unlogged and confined to one partition,
//     so they are a single mutation. LWTs are for what must exclude every
//     other node, which no timestamp rule can say: the outbound sender's
//     push claims (pushes.go; its rows are only ever changed by LWTs,
//     except the create), idempotency keys and receipt subscriptions, and
//     the fates of tracked messages (fates.go: every write of a fate row
//     is an LWT, so one settler wins).
//   - Never retry a counter increment (fate_count) that may have been
//     applied: counters are not idempotent. Such statements are marked
//     once (consistency.go); a lost increment is logged, never redone.
//   - Never write to the message table or the router cursor without an
//     explicit timestamp from timestamps.go: a clock-assigned timestamp
//     orders writes by arrival, not by the data, and breaks the rules.
//   - Never return a gocql error unmapped: every error wraps one of the
//     storage errors (see errors.go) or is wrapped with context as-is.
//
// Size: it is one implementation of one interface, storage.Store, whose
// parts (router, messages, broadcasts, the sender's pushes, index, rate
// shares and idempotency keys) share the session, the statements'
// consistency classes (consistency.go), the timestamp rules and the error
// mapping; split, each part would need those exported across packages.
// One file per part keeps the concepts apart.
package scylla
