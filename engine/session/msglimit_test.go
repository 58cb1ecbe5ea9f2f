package session

import (
	"errors"
	"fmt"
	"testing"
	"time"
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
	h.checkStatus()
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
	if code := h.checkStatus(); code != 202 || len(h.jobs) != 0 {
		t.Fatalf("check while dropping: %d %+v", code, h.jobs)
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
	h.checkStatus()
	h.answerPage(h.job(JobCheck), 0, 3, 0)
	drop := h.job(JobDrop)
	h.done(&Result{Job: drop, Err: errors.New("down")})
	h.closedWith(1013)
}

func TestMsgLimitCountsOnlyOneDrain(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxUnacked, c.MsgLimit = 3, 4 })
	h.ready(testUAID)
	h.checkStatus()
	check := h.job(JobCheck)
	// Expired messages do not count: 3 sent, 3 expired skipped.
	sent := h.answerPage(check, 0, 3, 0)
	check = lastCheck(t, h.ackPage(sent))
	h.answerPage(check, 3, 0, 3)
	check = lastCheck(t, h.jobs)
	// Storage found empty: the count starts again.
	h.answerPage(check, 6, 0, 0)
	h.checkStatus()
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
	h.checkStatus()
	check := h.job(JobCheck)
	for i := range 10 {
		sent := h.answerPage(check, 3*i, 3, 0)
		if len(sent) != 3 || len(h.messages()) != 3 {
			t.Fatalf("page %d not sent", i)
		}
		check = lastCheck(t, h.ackPage(sent))
	}
}
