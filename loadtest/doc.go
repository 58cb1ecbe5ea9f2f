// Package loadtest measures the push service's capacity and latency the
// way operators size a cluster: many virtual user agents speaking the
// Mozilla push protocol over real websockets, application servers posting
// VAPID-signed, aes128gcm-encrypted pushes at an open-loop offered rate, every message accounted for, and the connection nodes' memory
// sampled from outside while connections grow.
//
// This package is the coordinator: Run runs one scenario (scenario.Config;
// hold, notify, stored, churn or broadcast) against processes it starts and stops
// itself, and Capacity runs the standard profile behind `make capacity`.
// The user agents' scenarios live here, beside the worker pool they drive
// (hold.go, notify.go, delivery.go for stored and churn, broadcast.go).
// The sender scenario (package outbound, `make sender-bench`) drives the
// outbound sender instead: autoendpoint with its workers against a fake
// Swrve in this process, POST /push from there, no user agents.
// The rest has its own packages:
//
//	scenario  what a run is: the scenarios, Config, flags, validation
//	cluster   the processes under test, their storage and binaries, the run's Megaphone
//	monitor   the run's clock, phases, samples and progress display
//	outbound  the sender scenario (the only one linking the fake providers)
//	worker    the worker process and the JSON-lines protocol that drives it
//	agent     the virtual user agents on their epoll loops
//	appserver the application server (open-loop POSTs)
//	ledger    every push's fate, and the payload that names it
//	receipts  the application server's delivery receipts (-receipts), checked against the ledgers
//	hist      latency histograms and the worker clock they are read on
//	probe     /proc and /metrics readings of the processes under test
//	report    the JSON and HTML reports, the summary, docs/capacity.md
//
// Shape (one process cannot hold more than about 20,000 sockets here):
//
//	coordinator (Run) ──stdin/stdout JSON lines──▶ worker processes (this binary, re-executed)
//	   │  starts autoendpoint, then autoconnect ×E    │ epoll event loops own the user agents
//	   │  samples /proc/<pid> and /metrics            │ an open-loop application server per worker
//	   └─ progress, JSON + HTML report                 └ ledger: every push's fate
//
// Child processes (engines, endpoint, workers) run through internal/proc:
// they die with the coordinator however it ends, and are stopped by PID,
// also when a later one fails to start (the run then reports that failure).
// Latency is measured from a push's intended send time (the open-loop
// schedule), so a slow server cannot hide its queueing by slowing the
// application server (no coordinated omission).
//
// It must never talk to a non-loopback address it was not given, never
// stop a process it did not start, and never wait on the server to pace
// the offered push rate. Linux only (epoll, Pdeathsig, /proc).
package loadtest
