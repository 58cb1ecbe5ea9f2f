package session

import (
	"errors"
	"testing"

	gws "github.com/gobwas/ws"
	"github.com/google/uuid"
)

// TestCloseWaitsForAckDeletes: the client's close frame is answered only
// once the messages it acked are deleted, so a reconnect (to any node)
// never reads back what was acked.
func TestCloseWaitsForAckDeletes(t *testing.T) {
	h := newHarness(t, nil).ready(testUAID)
	h.checkStatus()
	sent := h.answerPage(h.job(JobCheck), 0, 2, 0)
	h.send(ackMsg(sent...))
	if len(h.jobs) != 2 || h.jobs[0].Kind != JobDelete {
		t.Fatalf("acks asked %+v", h.jobs)
	}
	h.feed(clientFrame(gws.OpClose, gws.NewCloseFrameBody(1000, "")))
	if len(h.out) != 0 || h.close || h.s.Closing() {
		t.Fatalf("close answered before the deletes: %q", h.out)
	}
	if code := deliver(h, "late"); code != 503 {
		t.Fatalf("a delivery to a closing client got %d, want 503 (stored)", code)
	}
	h.send(`{"messageType":"register","channelID":"` + uuid.NewString() + `"}`)
	if len(h.out) != 0 || len(h.jobs) != 0 {
		t.Fatalf("input after the close frame was served: %q %+v", h.out, h.jobs)
	}
	h.done(&Result{Job: Job{Kind: JobDelete}})
	if len(h.out) != 0 || h.close {
		t.Fatalf("closed with a delete still running: %q", h.out)
	}
	h.done(&Result{Job: Job{Kind: JobDelete}, Err: errors.New("timeout")})
	h.closedWith(1000)
	h.noJobs()
}
