package loadtest

import (
	"context"
	"fmt"
	"time"
)

// notify connects every user agent, then offers each rate of the ladder
// for StageTime; after the first rate whose p99 passes P99Limit (and
// MinStages) it stops.
func (r *run) notify(ctx context.Context) error {
	cfg := &r.cfg
	c, err := r.connectAll(ctx, "connect")
	if err != nil {
		return errRun("connect", err)
	}
	r.rep.Connect = c
	r.logf("connected %s user agents in %.1fs", num(c.Connected), c.Seconds)
	n := &NotifyReport{UAs: cfg.UAs, P99Limit: ms(cfg.P99Limit)}
	r.rep.Notify = n
	workers := float64(len(r.pool.ws))
	for i, rate := range cfg.Rates {
		count := int64(rate * cfg.StageTime.Seconds())
		sent0 := r.lastSample().Sent
		t0 := r.now()
		r.setPhase(fmt.Sprintf("%s/s", num(rate)), count, func(s Sample) int64 { return s.Sent - sent0 })
		evs, err := r.pool.all(ctx, func(*workerProc) command {
			return command{Op: opSend, Send: &sendArgs{Rate: rate / workers, Duration: cfg.StageTime, Pick: pickRoundRobin,
				Warmup: cfg.Warmup, Grace: cfg.DeliveryGrace}}
		})
		if err != nil {
			return errRun("send", err)
		}
		st, err := mergeStage(rate, evs)
		if err != nil {
			return err
		}
		st.CPU = r.avgCPU(t0, r.now())
		n.Stages = append(n.Stages, st)
		r.logf("%s/s offered: %s/s accepted, %s/s delivered, p50 %.1f p99 %.1f p99.9 %.1f max %.1f ms, %d lost, errors %s",
			num(rate), num(st.Achieved), num(st.Delivered), st.Latency.P50, st.Latency.P99, st.Latency.P999, st.Latency.Max,
			st.Account.Lost, countsOrNone(st.Errors))
		if cfg.P99Limit > 0 && st.Latency.P99 > ms(cfg.P99Limit) {
			if n.CrossedAt == 0 {
				n.CrossedAt = rate
			}
			if i+1 >= cfg.MinStages {
				break
			}
		}
	}
	if err := r.disconnectAll(ctx, "close"); err != nil {
		return errRun("disconnect", err)
	}
	return nil
}

// mergeStage adds up the workers' results of one rate.
func mergeStage(rate float64, evs []event) (Stage, error) {
	st := Stage{Offered: rate, Errors: map[string]int64{}}
	lat, resp := newHist(), newHist()
	for _, ev := range evs {
		s := ev.Send
		st.Scheduled += s.Scheduled
		st.Seconds = max(st.Seconds, s.Seconds)
		st.Account.add(s.Account)
		for k, v := range s.Errors {
			st.Errors[k] += v
		}
		if err := mergeEncoded(lat, s.Hist); err != nil {
			return st, err
		}
		if err := mergeEncoded(resp, s.Resp); err != nil {
			return st, err
		}
	}
	st.Latency, st.Response = summarize(lat), summarize(resp)
	if st.Seconds > 0 {
		st.Achieved = float64(st.Account.Accepted) / st.Seconds
		st.Delivered = float64(st.Account.Delivered) / st.Seconds
	}
	return st, nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
