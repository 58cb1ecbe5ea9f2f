// Package sender is the durable, rate-limited outbound sender (docs/sender.md):
// it accepts pushes for mobile devices, stores each before it answers,
// and sends them through providers (provider.Provider) no faster than
// each provider allows, retrying when the provider says so, with every
// state and attempt recorded through storage.PushStore.
//
// The pipeline, per provider (lane.go): a bounded queue, fair between the
// push API's clients (queue.go: a line per client, read in turn, each
// client within its share of the slots), one reader that starts a send no
// sooner than the provider's minimum delay after the previous one, and a
// bounded pool of concurrent sends (the Java sender's
// averageProcessingMillis / delayMillis) where the reader sends itself
// when the pool is full (caller runs), so concurrency never grows without
// bound. Two jobs (jobs.go) move due pushes into the queues in bounded
// portions: SendScheduled (SCHEDULED, due RETRY, and IN_MEMORY pushes
// whose node's lease expired) and SendPending (PENDING).
//
// Durability beyond the Java sender's: a push is only queued under a lease
// claimed by a conditional update (storage.PushStore.UpdatePush), so two
// sender nodes never both send it; the attempt row is written (IN_PROCESS)
// before the provider is called, so a push found IN_PROCESS after a crash
// is known to be interrupted and is resent with the same dedup key, or
// under the configured policy when the provider has none (send.go).
//
// Size: the life cycle, the queue and the leases all act on one push's
// state and version, and a stop, a claim or a send crosses them all; the
// pace of the provider's calls stands on its own (sender/ratelimit).
//
// It must never import the API tier (apitier), a concrete provider, or a
// storage backend: the binaries wire those in. Every exported method of
// Sender is safe for concurrent use.
package sender
