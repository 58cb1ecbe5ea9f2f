package agent

import (
	"math"
	"sync"
	"time"
)

// Connect connects every offline user agent (the connect command).
type Connect struct {
	Rate float64 `json:"rate"` // handshakes started per second
	// Upto: only the first Upto user agents of the worker (hold's steps);
	// 0 means all.
	Upto int `json:"upto"`
}

// ConnectResult says how a Connect went.
type ConnectResult struct {
	Connected int     `json:"connected"` // ready at the end
	Attempts  int64   `json:"attempts"`
	Failures  int64   `json:"failures"`
	Seconds   float64 `json:"seconds"`
	Handshake []byte  `json:"handshake"` // latency of this command's handshakes (hist.Encode)
}

// Churn starts (On) or stops user agents cycling: online for an
// exponentially distributed time of mean SessionMean, then offline for
// one of mean OfflineMean.
type Churn struct {
	On          bool          `json:"on"`
	SessionMean time.Duration `json:"session_mean"`
	OfflineMean time.Duration `json:"offline_mean"`
}

func (s *Set) ConnectAll(a Connect) ConnectResult {
	start := time.Now()
	n := len(s.uas)
	if a.Upto > 0 {
		n = min(n, a.Upto)
	}
	todo := s.notReady(n)
	s.env.Handshake.StartStage(0, math.MaxInt64)
	tick := time.Duration(float64(time.Second) / a.Rate)
	next := time.Now()
	tries := map[*ua]int{}
	type retry struct {
		u  *ua
		at time.Time
	}
	var retries []retry
	var res ConnectResult
	inFlight := 0
	for len(todo) > 0 || len(retries) > 0 || inFlight > 0 {
		now := time.Now()
		for len(retries) > 0 && !now.Before(retries[0].at) {
			todo = append(todo, retries[0].u)
			retries = retries[1:]
		}
		for len(todo) > 0 && inFlight < s.cfg.MaxPending && !now.Before(next) {
			u := todo[0]
			todo = todo[1:]
			inFlight++
			tries[u]++
			res.Attempts++
			u.l.post(u.connectFor)
			next = next.Add(tick)
		}
		if inFlight >= s.cfg.MaxPending && next.Before(now) {
			next = now // held back by the cap: no burst to catch up
		}
		var wake <-chan time.Time
		switch {
		case len(todo) > 0 && inFlight < s.cfg.MaxPending:
			wake = time.After(time.Until(next))
		case len(retries) > 0:
			wake = time.After(time.Until(retries[0].at))
		}
		select {
		case o := <-s.results:
			inFlight--
			if !o.ok {
				res.Failures++
				if tries[o.u] <= s.cfg.ConnectRetries {
					retries = append(retries, retry{o.u, time.Now().Add(time.Second)})
				}
			}
		case <-wake:
		case <-s.quit:
			return res
		}
	}
	res.Connected = int(s.connected.Load())
	res.Seconds = time.Since(start).Seconds()
	res.Handshake = s.env.Handshake.TakeStage()
	return res
}

// notReady lists the first n user agents that are not ready.
func (s *Set) notReady(n int) []*ua {
	var out []*ua
	var mu sync.Mutex
	for _, l := range s.loops {
		l.call(func() {
			for _, u := range l.uas {
				if int(u.idx) < n && u.state != stReady {
					mu.Lock()
					out = append(out, u)
					mu.Unlock()
				}
			}
		})
	}
	return out
}

// DisconnectAll closes every connection with a close handshake (waiting
// up to the close timeout) and abandons handshakes in progress.
func (s *Set) DisconnectAll() {
	for _, l := range s.loops {
		l.call(func() {
			for _, u := range l.uas {
				u.reconnect = false
				switch {
				case u.state == stReady:
					u.disconnect()
				case u.state.handshaking():
					u.pacer = false
					u.release()
				}
			}
		})
	}
	deadline := time.Now().Add(2 * closeTimeout)
	for (s.connected.Load() > 0 || s.closing.Load() > 0) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
}

// Churn starts or stops the user agents' connect/disconnect cycle.
func (s *Set) Churn(a Churn) {
	for _, l := range s.loops {
		l.call(func() {
			if !a.On {
				l.churn = nil
				for _, u := range l.uas {
					if u.state == stReady {
						u.leaveAt = 0
						u.armReadyTimer()
					}
				}
				return
			}
			c := a
			l.churn = &c
			for _, u := range l.uas {
				switch u.state {
				case stReady:
					u.leaveAt = l.now + l.exp(int64(c.SessionMean))
					u.armReadyTimer()
				case stOffline:
					l.setTimer(u, l.now+l.exp(int64(c.OfflineMean)))
				}
			}
		})
	}
}
