package outbound

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/autopush-go/autopush/loadtest/monitor"
	"github.com/autopush-go/autopush/loadtest/report"
	"github.com/autopush-go/autopush/sender/sendertest/fcmfake"
)

// The accounting after a sender run: every accepted push drained and
// SENT, and the provider's side of it (its rate, any second's calls, the
// calls' transit, duplicates).

// listPage is one answer of GET /push?state=.
type listPage struct {
	Pushes []struct {
		ID       string `json:"id"`
		State    string `json:"state"`
		PushKey  string `json:"pushKey"`
		Attempts []struct {
			Called *time.Time `json:"called"`
		} `json:"attempts"`
	} `json:"pushes"`
	Next *string `json:"next"`
}

func getPage(ctx context.Context, base, apiKey, state, cursor string, limit int) (listPage, error) {
	u := base + "/push?state=" + state + "&limit=" + strconv.Itoa(limit)
	if cursor != "" {
		u += "&cursor=" + cursor
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return listPage{}, err
	}
	req.Header.Set("Authorization", "Bearer "+apiKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return listPage{}, err
	}
	defer resp.Body.Close()
	var page listPage
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return page, fmt.Errorf("GET %s: %d %s", u, resp.StatusCode, b)
	}
	return page, json.NewDecoder(resp.Body).Decode(&page)
}

// unfinished are the states a push leaves.
var unfinished = []string{"SCHEDULED", "PENDING", "IN_MEMORY", "RETRY"}

// waitDrained waits until no push is in a state it leaves, or timeout.
func waitDrained(ctx context.Context, base, apiKey string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		left := false
		for _, st := range unfinished {
			// A page may come back short, even empty, with more to follow
			// (pushes that moved on while it was read).
			for cursor := ""; !left; {
				page, err := getPage(ctx, base, apiKey, st, cursor, 100)
				if err != nil {
					return fmt.Errorf("loadtest: drain: %w", err)
				}
				left = len(page.Pushes) > 0
				if page.Next == nil {
					break
				}
				cursor = *page.Next
			}
		}
		if !left {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("loadtest: drain: pushes still unfinished after %s", timeout)
		}
		if err := monitor.Sleep(ctx, 250*time.Millisecond); err != nil { // polling the sender's answer
			return err
		}
	}
}

// account pages through every state and counts the accepted pushes in
// each (all of them must be SENT); it returns each one's attempts by its
// pushKey (the device, one per push with Swrve), and when each attempt
// that reached the provider's client was let through its gate, ascending.
// WebPush answers do not name the sender's push: then every push of the
// run's store counts.
func (p *poster) account(ctx context.Context, rep *report.SenderReport) (map[string]int, []time.Time, error) {
	ours := make(map[string]bool, len(p.ids))
	for _, id := range p.ids {
		if id != "" {
			ours[id] = true
		}
	}
	all := p.endpoints != nil
	attempts := make(map[string]int, len(ours))
	p.sentIDs = make(map[string]bool, len(ours))
	var calls []time.Time
	for _, st := range append(slices.Clone(unfinished), "SENT", "FAILED", "GIVEN_UP") {
		cursor := ""
		for {
			page, err := getPage(ctx, p.url, strings.TrimPrefix(p.auth, "Bearer "), st, cursor, 1000)
			if err != nil {
				return nil, nil, err
			}
			for _, x := range page.Pushes {
				if all || ours[x.ID] {
					rep.States[st]++
					if st == "SENT" {
						p.sentIDs[x.ID] = true
					}
					attempts[x.PushKey] = len(x.Attempts)
					for _, a := range x.Attempts {
						if a.Called != nil {
							calls = append(calls, *a.Called)
						}
					}
					if len(x.Attempts) > 1 {
						rep.Retried++
					}
				}
			}
			if page.Next == nil {
				break
			}
			cursor = *page.Next
		}
	}
	rep.Sent = rep.States["SENT"]
	slices.SortFunc(calls, time.Time.Compare)
	return attempts, calls, nil
}

// providerSide reads the fake's receipts (sorting them by arrival)
// against the sender's calls (ascending): sends per second since the
// first, the most calls and receipts in any second and the transit
// spread between them, the rate over the window [warmup,
// warmup+measure), and duplicates: receipts of a push beyond the attempts
// its log shows (a retry after a timeout is a second receipt, and says
// so).
func providerSide(rep *report.SenderReport, log []receipt, attempts map[string]int, calls []time.Time, warmup, measure time.Duration) {
	// A fake stamps a receipt before it logs it, so receipts handled at
	// once may be logged out of order: sorted here (in place, for
	// queueMin too), as the seconds since the first, the sliding window
	// and the pairing with the calls need.
	slices.SortStableFunc(log, func(a, b receipt) int { return a.at.Compare(b.at) })
	rep.Received = int64(len(log))
	seen := make(map[string]int, len(log))
	times := make([]time.Time, len(log))
	for i, x := range log {
		if seen[x.key]++; seen[x.key] > max(attempts[x.key], 1) {
			rep.Duplicates++
		}
		times[i] = x.at
	}
	rep.Distinct = int64(len(seen))
	rep.MaxAnySecond = fcmfake.MaxInWindow(times, time.Second)
	rep.CallsMaxAnySecond = fcmfake.MaxInWindow(calls, time.Second)
	rep.TransitSpreadMs = transitSpread(calls, times)
	if len(log) == 0 {
		return
	}
	first := log[0].at
	for _, x := range log {
		sec := int(x.at.Sub(first) / time.Second)
		for len(rep.PerSecond) <= sec {
			rep.PerSecond = append(rep.PerSecond, 0)
		}
		rep.PerSecond[sec]++
	}
	w0, w1 := int(warmup/time.Second), int((warmup+measure)/time.Second)
	rep.Window = [2]int{w0, w1}
	if w1 > len(rep.PerSecond) {
		w1 = len(rep.PerSecond) // the run ended early; the shortfall shows in the rate
	}
	n := 0
	rep.WindowMin = -1
	for _, c := range rep.PerSecond[min(w0, w1):w1] {
		n += c
		if rep.WindowMin < 0 || c < rep.WindowMin {
			rep.WindowMin = c
		}
		rep.WindowMax = max(rep.WindowMax, c)
	}
	rep.Measured = float64(n) / float64(rep.Window[1]-rep.Window[0])
	rep.RateError = rep.Measured/rep.Pace - 1
}

// transitSpread is how much the time from a call to its arrival varied,
// in ms, plus the 1 ms the calls' times are truncated to; -1 unless every
// call arrived (as many of each). Both are ascending. Any pairing of
// arrivals with calls bounds the arrivals in a window by the calls in a
// window longer by its delays' spread; the k-th arrival with the k-th
// call is the pairing of least spread, and needs no push ids.
func transitSpread(calls, arrivals []time.Time) float64 {
	if len(calls) != len(arrivals) || len(calls) == 0 {
		return -1
	}
	lo, hi := arrivals[0].Sub(calls[0]), arrivals[0].Sub(calls[0])
	for k := range calls {
		d := arrivals[k].Sub(calls[k])
		lo, hi = min(lo, d), max(hi, d)
	}
	return float64(hi-lo+time.Millisecond) / float64(time.Millisecond)
}

// queueMin is the smallest queue sampled inside the window (seconds since
// the first send; log sorted by providerSide): a queue that ran dry would
// lower the rate for lack of pushes, not because of the sender.
func queueMin(samples []report.SenderSample, log []receipt, started time.Time, window [2]int) int {
	if len(log) == 0 {
		return 0
	}
	first := log[0].at.Sub(started).Seconds()
	m := -1
	for _, s := range samples {
		if t := s.T - first; t >= float64(window[0]) && t < float64(window[1]) && (m < 0 || s.QueueSize < m) {
			m = s.QueueSize
		}
	}
	return max(m, 0)
}
