// Package broadcast is a connection node's broadcast (megaphone) state:
// the current version of every broadcast id the node knows (Firefox's
// Remote Settings learns from it that new data is out), and the
// subscriptions of its clients.
//
// Subscriptions are shared, not copied per client: each distinct
// subscription (a set of broadcast ids and the versions generation the
// client is current with) is interned once per node and reference
// counted, and a session keeps only its 32-bit index (a Sub). Nearly
// every Firefox subscribes to the same one or two ids, so a million idle
// clients share a handful of entries and pay 4 bytes each.
//
// The versions are replaced whole (copy on write) when the node's poller
// finds a change; readers never wait for it. A change bumps the
// generation, so a subscription behind it knows exactly which of its ids
// to send (Table.CatchUp), however many changes it missed.
//
// It must never do I/O, start a goroutine or read a clock: the session
// core calls it inside transitions on the event loops. A Table is safe for
// concurrent use.
package broadcast
