package session

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"testing"

	gws "github.com/gobwas/ws"
	"github.com/google/uuid"
)

// TestCloseWaitsForAckDeletes: the client's close frame is answered only
// once the messages it acked are deleted, so a reconnect (to any node)
// never reads back what was acked.
func TestCloseWaitsForAckDeletes(t *testing.T) {
	h := newHarness(t, nil).ready(testUAID)
	h.askCheck()
	sent := h.answerPage(h.job(JobCheck), 0, 2, 0)
	h.send(ackMsg(sent...))
	if len(h.jobs) != 2 || h.jobs[0].Kind != JobDelete {
		t.Fatalf("acks asked %+v", h.jobs)
	}
	h.feed(clientFrame(gws.OpClose, gws.NewCloseFrameBody(1000, "")))
	if len(h.out) != 0 || h.close || h.s.Closing() {
		t.Fatalf("close answered before the deletes: %q", h.out)
	}
	if got := deliver(h, "late"); got != Busy {
		t.Fatalf("a delivery to a closing client was %v, want busy (stored)", got)
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

// TestShutdownReadsAcksUntilTheClientCloses: the drain's 1001 close
// leaves the connection open; the acks the client sent before it read
// that close are read and count (a stored message's delete, a direct
// message not stored again on leaving), nothing more is written, and the
// client's close frame ends the connection once the deletes are done.
func TestShutdownReadsAcksUntilTheClientCloses(t *testing.T) {
	h := newHarness(t, nil).ready(testUAID)
	h.askCheck()
	sent := h.answerPage(h.job(JobCheck), 0, 2, 0)
	h.send(ackMsg(sent[0]))
	h.done(&Result{Job: h.job(JobDelete)})
	// sent[1] stays unacked: the page's successor is not read yet.
	h.env.Draining.Store(true)
	h.step(h.s.Shutdown)
	h.wentAway()
	if got := deliver(h, "late"); got == Delivered || len(h.out) != 0 {
		t.Fatalf("a delivery after the close frame was %v, wrote %q", got, h.out)
	}
	// What the client sends now: its ack (sent before it read our close)
	// counts; nothing else is answered.
	h.send(ackMsg(sent[1]))
	del := h.job(JobDelete)
	if len(h.out) != 0 || h.close || h.counter("Acked") != 2 {
		t.Fatalf("ack after the close frame: wrote %q close %v acked %d", h.out, h.close, h.counter("Acked"))
	}
	h.send(`{"messageType":"register","channelID":"` + uuid.NewString() + `"}`)
	h.feed(clientFrame(gws.OpPing, []byte("p")))
	h.send(`{"messageType":"ping"}`)
	if len(h.out) != 0 || len(h.jobs) != 0 {
		t.Fatalf("input after the close frame was served: %q %+v", h.out, h.jobs)
	}
	h.feed(clientFrame(gws.OpClose, gws.NewCloseFrameBody(1000, "")))
	if h.close || len(h.out) != 0 {
		t.Fatalf("closed with a delete still running (close %v, wrote %q)", h.close, h.out)
	}
	h.done(&Result{Job: del})
	if !h.close || len(h.out) != 0 {
		t.Fatalf("the client's close with the deletes done: close %v, wrote %q (no second close frame)", h.close, h.out)
	}
	h.noJobs()
	if _, ok := h.s.Close(h.env, 0); !ok || h.env.InFlight.Load() != 0 {
		t.Fatalf("leave %v in flight %d", ok, h.env.InFlight.Load())
	}
}

// TestShutdownDirectAckNotStoredAgain: a direct notification acked after
// the drain's close is not stored by the leave; the unacked one is.
func TestShutdownDirectAckNotStoredAgain(t *testing.T) {
	h := newHarness(t, nil).ready(testUAID)
	deliver(h, "d1")
	deliver(h, "d2")
	h.env.Draining.Store(true)
	h.step(h.s.Shutdown)
	h.wentAway()
	h.send(ackMsg("d1"))
	h.noJobs()
	h.feed(clientFrame(gws.OpClose, gws.NewCloseFrameBody(1000, "")))
	if !h.close || len(h.out) != 0 {
		t.Fatalf("the client's close: close %v, wrote %q", h.close, h.out)
	}
	leave, ok := h.s.Close(h.env, 0)
	if !ok || len(leave.Keep) != 1 || leave.Keep[0].Version != "d2" {
		t.Fatalf("leave %v keeps %+v, want only the unacked d2", ok, leave.Keep)
	}
}

// TestShutdownClientNeverAnswers: a client that does not answer the
// drain's close is disconnected once silent for the keepalive interval
// (the node bounds the wait itself: engine.Drain), with no ping and
// nothing else written; a bad frame meanwhile closes too, without a second
// close frame.
func TestShutdownClientNeverAnswers(t *testing.T) {
	h := newHarness(t, nil).ready(testUAID)
	h.step(h.s.Shutdown)
	h.wentAway()
	h.now = h.now.Add(testConfig.PingInterval / 2)
	h.send(ackMsg("never-sent")) // the client is not silent
	h.now = h.now.Add(testConfig.PingInterval / 2)
	h.step(h.s.Tick)
	if h.close || len(h.out) != 0 || h.due != h.now.Add(testConfig.PingInterval/2).UnixMilli() {
		t.Fatalf("a stale deadline: close %v, wrote %q, next deadline %d", h.close, h.out, h.due)
	}
	h.now = h.now.Add(testConfig.PingInterval / 2)
	h.step(h.s.Tick)
	if !h.close || len(h.out) != 0 {
		t.Fatalf("silent for the keepalive interval: close %v, wrote %q", h.close, h.out)
	}
	h = newHarness(t, nil).ready(testUAID)
	h.step(h.s.Shutdown)
	h.feed([]byte{0x81, 0x05, 'h', 'e', 'l', 'l', 'o'}) // unmasked
	if !h.close || len(h.out) != 0 {
		t.Fatalf("bad frame after the close: close %v, wrote %q", h.close, h.out)
	}
}

// TestAckThenImmediateClose is the reference's test_msg_limit from the
// session's side: the client acks a page and closes at once, while the
// acks' deletes run. The close is answered only once the page those acks
// made owed is read and counted: past msg-limit the user is dropped and
// the answer is 1000 "uaid reset"; under it the page is not sent (it
// stays stored) and the answer is a plain 1000.
func TestAckThenImmediateClose(t *testing.T) {
	for _, over := range []bool{true, false} {
		t.Run(fmt.Sprint("over the limit ", over), func(t *testing.T) {
			// Pages of 3; the seventh message passes a limit of 6.
			h := newHarness(t, func(c *Config) { c.MaxUnacked, c.MsgLimit = 3, 6 })
			h.ready(testUAID)
			h.askCheck()
			check := lastCheck(t, h.jobs)
			sent := h.answerPage(check, 0, 3, 0)
			check = lastCheck(t, h.ackPage(sent))
			sent = h.answerPage(check, 3, 3, 0)
			h.send(ackMsg(sent...))
			deletes := slices.Clone(h.jobs)
			h.feed(clientFrame(gws.OpClose, gws.NewCloseFrameBody(1000, "")))
			for i, d := range deletes {
				if h.close || len(h.out) != 0 {
					t.Fatalf("the close was answered with %d of %d deletes running: %q", len(deletes)-i, len(deletes), h.out)
				}
				h.done(&Result{Job: d})
			}
			if h.close || len(h.out) != 0 {
				t.Fatalf("the close was answered before the owed page was read: %q", h.out)
			}
			check = h.job(JobCheck)
			n := 1
			if !over {
				n = 0
			}
			h.answerPage(check, 6, n, 0)
			if !over {
				h.closedWith(1000)
				h.noJobs()
				if h.counter("UAIDResets") != 0 {
					t.Fatal("reset under the limit")
				}
				return
			}
			if len(h.out) != 0 || h.close {
				t.Fatalf("the page over the limit was sent, or the close answered before the drop: %q", h.out)
			}
			h.done(&Result{Job: h.job(JobDrop)})
			h.closedWith(1000)
			if fs := h.frames(); !bytes.Contains(fs[len(fs)-1].Payload, []byte("uaid reset")) {
				t.Fatalf("close %q, want uaid reset", fs[len(fs)-1].Payload)
			}
			if _, ok := h.s.Close(h.env, 0); ok || h.counter("UAIDResets") != 1 {
				t.Fatalf("a dropped user left work behind (%v), resets %d", ok, h.counter("UAIDResets"))
			}
		})
	}
}

// TestCloseDuringOwedRead: the client's close arrives once the deletes
// ended and the next page is being read: the answer waits for that read
// and its limit check. Without a msg-limit the read does not matter: the
// close is answered at once.
func TestCloseDuringOwedRead(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxUnacked, c.MsgLimit = 3, 3 })
	h.ready(testUAID)
	h.askCheck()
	check := lastCheck(t, h.ackPage(h.answerPage(h.job(JobCheck), 0, 3, 0)))
	h.feed(clientFrame(gws.OpClose, gws.NewCloseFrameBody(1000, "")))
	if h.close || len(h.out) != 0 {
		t.Fatalf("the close was answered with the owed read running: %q", h.out)
	}
	h.answerPage(check, 3, 1, 0)
	h.done(&Result{Job: h.job(JobDrop)})
	h.closedWith(1000)

	h = newHarness(t, func(c *Config) { c.MaxUnacked, c.MsgLimit = 3, 0 })
	h.ready(testUAID)
	h.askCheck()
	check = lastCheck(t, h.ackPage(h.answerPage(h.job(JobCheck), 0, 3, 0)))
	h.feed(clientFrame(gws.OpClose, gws.NewCloseFrameBody(1000, "")))
	h.closedWith(1000)
	h.answerPage(check, 3, 1, 0)
	if len(h.out) != 0 || len(h.jobs) != 0 {
		t.Fatalf("the read's result after the close: wrote %q, asked %+v", h.out, h.jobs)
	}
}
