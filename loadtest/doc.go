// Package loadtest measures the push service's capacity and latency the
// way operators size a cluster: many virtual user agents speaking the
// Mozilla push protocol over real websockets, application-server senders
// posting VAPID-signed, aes128gcm-encrypted pushes at an open-loop offered
// rate, every message accounted for, and the connection nodes' memory
// sampled from outside while connections grow.
//
// Four scenarios (Run, cmd/loadtest):
//
//   - hold: N idle user agents (hello, K channels, then idle with pings),
//     ramped at a connect rate in steps; the engines' RSS at each step
//     gives user-space bytes per connection;
//   - notify: M connected user agents, pushes at a ladder of offered
//     rates; end-to-end latency (POST start to receipt) in HDR histograms;
//   - stored: user agents offline, pushes stored, user agents reconnect
//     and drain; exactly-once accounting;
//   - churn: user agents connect and disconnect while pushes flow; the
//     same accounting.
//
// Shape (one process cannot hold more than about 20,000 sockets here):
//
//	coordinator (Run) ──stdin/stdout JSON lines──▶ worker processes (this binary, re-executed)
//	   │  starts autoconnect ×E, autoendpoint         │ epoll event loops own the user agents
//	   │  samples /proc/<pid> and /metrics            │ an open-loop sender per worker
//	   └─ progress, JSON + HTML report                 └ ledger: every push's fate
//
// The user agents are state machines driven by a few epoll loops per
// worker (loop.go), never a goroutine each; sockets are bound to
// 127.0.0.2-127.0.0.251 before connecting so ephemeral ports never run
// out. Latency is measured from a push's intended send time (the open-loop
// schedule), so a slow server cannot hide its queueing by slowing the
// sender (no coordinated omission).
//
// It must never talk to a non-loopback address it was not given, never
// stop a process it did not start, and never wait on the server to pace
// the offered push rate. Linux only (epoll, Pdeathsig, /proc).
package loadtest
