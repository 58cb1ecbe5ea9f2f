package tracking

import (
	"context"

	"github.com/autopush-go/autopush/storage"
)

// The reference's report (reference-milestones, docs/receipts.md): a
// flat JSON object of how many tracked messages are in each state now,
// by the reference's state names. Its states are not ours one for one;
// referenceStates says which of ours each counts.

// referenceStates maps each state name of the reference's report to the
// state of ours it counts; 0 where we have no such state (always 0).
var referenceStates = []struct {
	name  string
	state storage.FateState
}{
	{"received", storage.FateReceived},
	{"stored", storage.FateStored},
	// Read from storage by a connection node: ours goes from stored to
	// transmitted in one step.
	{"retrieved", 0},
	// Taken by the connection node for direct delivery; the older name
	// is transmitted_webpush.
	{"int_transmitted", storage.FateNodeTransmitted},
	{"transmitted_webpush", storage.FateNodeTransmitted},
	// Accepted by the connection node: ours has no such step apart from
	// taking it (int_transmitted); the older name is accepted_webpush.
	{"int_accepted", 0},
	{"accepted_webpush", 0},
	// Handed to the user agent's session: written to its websocket in
	// the same step here, counted as accepted.
	{"transmitted", 0},
	// Written to the user agent, awaiting its ack.
	{"accepted", storage.FateTransmitted},
	{"delivered", storage.FateDelivered},
	{"bridge_transmitted", storage.FateBridgeTransmitted},
	// Reported by the user agent or a bridge; we receive no such report.
	{"decryption_error", 0},
	{"not_delivered", 0},
	{"expired", storage.FateExpired},
	{"errored", storage.FateErrored},
	// Ours alone: removed before delivery (every drop reason).
	{"dropped", storage.FateDropped},
}

// ReferenceCounts is the reference's report: for each of its state names,
// how many tracked messages are in that state now (storage.FateStore
// LiveCounts), summed over every node.
func (t *Tracker) ReferenceCounts(ctx context.Context) (map[string]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, t.cfg.StorageTimeout)
	defer cancel()
	live, err := t.store.LiveCounts(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]int64, len(referenceStates))
	for _, r := range referenceStates {
		out[r.name] = 0
		if r.state != 0 {
			out[r.name] = live[r.state]
		}
	}
	return out, nil
}
