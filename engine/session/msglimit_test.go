package session

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	gws "github.com/gobwas/ws"
)

// answerPage answers the check job with n stored messages named from
// first on (expired ones among them when expired > 0), and returns the
// versions sent.
func (h *harness) answerPage(check Job, first, n, expired int) []string {
	h.t.Helper()
	var r = Result{Job: check, More: n+expired == check.Page}
	var sent []string
	base := uint64(h.now.Add(-time.Second).UnixNano())
	for i := range n + expired {
		v := fmt.Sprint("m", first+i)
		m := storedMsg(v, "", base+uint64(first+i), 600)
		if i >= n {
			m.SortKey = uint64(h.now.Add(-time.Hour).UnixNano()) + uint64(i)
			m.TTL = 60
		} else {
			sent = append(sent, v)
		}
		r.Stamps = append(r.Stamps, m)
	}
	h.done(&r)
	return sent
}

// ackPage acks versions and finishes their deletes; it returns the jobs
// the last delete's completion asked for.
func (h *harness) ackPage(versions []string) []Job {
	h.t.Helper()
	h.send(ackMsg(versions...))
	for range versions {
		h.done(&Result{Job: Job{Kind: JobDelete}})
	}
	return h.jobs
}

func lastCheck(t *testing.T, jobs []Job) Job {
	t.Helper()
	for i := len(jobs) - 1; i >= 0; i-- {
		if jobs[i].Kind == JobCheck {
			return jobs[i]
		}
	}
	t.Fatalf("no check in %+v", jobs)
	return Job{}
}

func TestMsgLimitDropsTheUser(t *testing.T) {
	// Pages of 3; the seventh stored message passes a limit of 6.
	h := newHarness(t, func(c *Config) { c.MaxUnacked, c.MsgLimit = 3, 6 })
	h.ready(testUAID)
	h.askCheck()
	check := h.job(JobCheck)
	next := 0
	for range 2 {
		sent := h.answerPage(check, next, 3, 0)
		if len(h.messages()) != 3 {
			t.Fatalf("page of %d", len(h.messages()))
		}
		next += 3
		check = lastCheck(t, h.ackPage(sent))
	}
	h.answerPage(check, next, 1, 0)
	if len(h.out) != 0 {
		t.Fatalf("the page over the limit was sent: %q", h.out)
	}
	drop := h.job(JobDrop)
	if drop.UAID != testUAID || h.s.Registered() || h.enrolled || h.close {
		t.Fatalf("drop %+v registered %v enrolled %v close %v", drop, h.s.Registered(), h.enrolled, h.close)
	}
	if h.counter("UAIDResets") != 1 {
		t.Fatal("not counted")
	}
	// Nothing more is read while the drop runs.
	if got := h.askCheck(); got != CheckLater || len(h.jobs) != 0 {
		t.Fatalf("check while dropping: %v %+v", got, h.jobs)
	}
	h.done(&Result{Job: drop})
	h.closedWith(1000)
	if _, ok := h.s.Close(h.env, 0); ok {
		t.Fatal("a dropped user left work behind (its record would be written again)")
	}
}

func TestMsgLimitDropFails(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxUnacked, c.MsgLimit = 3, 2 })
	h.ready(testUAID)
	h.askCheck()
	h.answerPage(h.job(JobCheck), 0, 3, 0)
	drop := h.job(JobDrop)
	h.done(&Result{Job: drop, Err: errors.New("down")})
	h.closedWith(1013)
}

func TestMsgLimitCountsOnlyOneDrain(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxUnacked, c.MsgLimit = 3, 4 })
	h.ready(testUAID)
	h.askCheck()
	check := h.job(JobCheck)
	// Expired messages do not count: 3 sent, 3 expired skipped.
	sent := h.answerPage(check, 0, 3, 0)
	check = lastCheck(t, h.ackPage(sent))
	h.answerPage(check, 3, 0, 3)
	check = lastCheck(t, h.jobs)
	// Storage found empty: the count starts again.
	h.answerPage(check, 6, 0, 0)
	h.askCheck()
	check = h.job(JobCheck)
	sent = h.answerPage(check, 7, 3, 0)
	if len(sent) != 3 || len(h.messages()) != 3 {
		t.Fatal("the count was not reset by an empty read")
	}
	check = lastCheck(t, h.ackPage(sent))
	h.answerPage(check, 10, 1, 0) // 4: at the limit, not over
	if len(h.messages()) != 1 || h.counter("UAIDResets") != 0 {
		t.Fatalf("dropped at the limit: %q", h.out)
	}
}

func TestMsgLimitOff(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxUnacked, c.MsgLimit = 3, 0 })
	h.ready(testUAID)
	h.askCheck()
	check := h.job(JobCheck)
	for i := range 10 {
		sent := h.answerPage(check, 3*i, 3, 0)
		if len(sent) != 3 || len(h.messages()) != 3 {
			t.Fatalf("page %d not sent", i)
		}
		check = lastCheck(t, h.ackPage(sent))
	}
}

// answerReceived answers the check job with one stored message per entry
// of received (when the endpoint received it), named from first on, each
// with an hour left to live; it returns the versions sent.
func (h *harness) answerReceived(check Job, first int, received ...time.Time) []string {
	h.t.Helper()
	r := Result{Job: check, More: len(received) == check.Page}
	var versions []string
	for i, at := range received {
		v := fmt.Sprint("m", first+i)
		ttl := int64(h.now.Sub(at)/time.Second) + 3600
		r.Stamps = append(r.Stamps, storedMsg(v, "", uint64(at.UnixNano())+uint64(i), ttl))
		versions = append(versions, v)
	}
	h.done(&r)
	return versions
}

// times is n copies of at.
func times(n int, at time.Time) []time.Time {
	out := make([]time.Time, n)
	for i := range out {
		out[i] = at
	}
	return out
}

// TestMsgLimitSparesAConnectedClient: what the endpoint received after
// the hello went through storage only because the client's window was
// full; it never counts toward the limit, however many pages of it the
// client acks, nor does the page its close waits for.
func TestMsgLimitSparesAConnectedClient(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxUnacked, c.MsgLimit = 3, 2 })
	h.ready(testUAID)
	hello := h.now
	check := Job{}
	for i := range 20 {
		h.now = h.now.Add(time.Second)
		if i == 0 {
			h.askCheck()
			check = h.job(JobCheck)
		}
		// A burst: every page full, storage never found empty.
		sent := h.answerReceived(check, 3*i, times(3, h.now.Add(-time.Second/2))...)
		if len(h.messages()) != 3 || h.counter("UAIDResets") != 0 {
			t.Fatalf("page %d of messages received after the hello (%s): sent %q, resets %d", i, hello, h.out, h.counter("UAIDResets"))
		}
		if i == 19 {
			// Its close, right behind the acks: the owed page is read,
			// and does not count either.
			h.send(ackMsg(sent...))
			deletes := slices.Clone(h.jobs)
			h.feed(clientFrame(gws.OpClose, gws.NewCloseFrameBody(1000, "")))
			for _, d := range deletes {
				h.done(&Result{Job: d})
			}
			h.answerReceived(h.job(JobCheck), 60, times(3, h.now)...)
			h.closedWith(1000)
			h.noJobs()
			if fs := h.frames(); bytes.Contains(fs[len(fs)-1].Payload, []byte("uaid reset")) || h.counter("UAIDResets") != 0 {
				t.Fatalf("the close answered %q, resets %d", fs[len(fs)-1].Payload, h.counter("UAIDResets"))
			}
			return
		}
		check = lastCheck(t, h.ackPage(sent))
	}
}

// TestMsgLimitCountsTheBacklog: what the endpoint received before the
// hello counts, whatever arrives after it in the same pages; past the
// limit the user is dropped, mid-drain.
func TestMsgLimitCountsTheBacklog(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxUnacked, c.MsgLimit = 3, 4 })
	away := h.now.Add(-24 * time.Hour)
	h.ready(testUAID)
	h.askCheck()
	check := h.job(JobCheck)
	h.now = h.now.Add(time.Minute)
	after := h.now.Add(-time.Second)
	pages := [][]time.Time{
		{away, away, away},    // 3
		{after, after, after}, // 3: more stored while it drains
		{away, after, after},  // 4: at the limit
		{after, away, after},  // 5: over
	}
	for i, page := range pages {
		sent := h.answerReceived(check, 3*i, page...)
		if i == len(pages)-1 {
			if len(h.out) != 0 {
				t.Fatalf("the page over the limit was sent: %q", h.out)
			}
			h.done(&Result{Job: h.job(JobDrop)})
			h.closedWith(1000)
			if h.counter("UAIDResets") != 1 {
				t.Fatal("not counted")
			}
			return
		}
		if len(h.messages()) != len(page) || h.counter("UAIDResets") != 0 {
			t.Fatalf("page %d: sent %q, resets %d", i, h.out, h.counter("UAIDResets"))
		}
		check = lastCheck(t, h.ackPage(sent))
	}
}
