package outbound

import (
	"encoding/base64"
	"encoding/json"
	"math/rand/v2"
	"sync"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/autopush-go/autopush/loadtest/cluster"
	"github.com/autopush-go/autopush/loadtest/hist"
	"github.com/autopush-go/autopush/loadtest/scenario"
	"github.com/autopush-go/autopush/sender/sendertest/fcmfake"
	"github.com/autopush-go/autopush/sender/sendertest/swrvefake"
)

// The fake provider of a sender run (Swrve, or FCM for bridged phones),
// its answer times and the receipts of what it was sent.

// providerFake is the fake provider of a sender run, as the run reads it.
type providerFake struct {
	name, url                    string
	provider                     cluster.Provider // what the sender node is pointed at
	inFlight, maxInFlight, count func() int
	receipts                     func() []receipt // in the fake's log order (providerSide sorts them)
	close                        func() error
}

// receipt is one send the fake received: when, and the push it carried
// (Swrve: its user, one per push; FCM: the payload, unique per push).
type receipt struct {
	at  time.Time
	key string
}

// startFake starts the fake provider answering after latency (scenario.MeasuredSwrve:
// Swrve's measured distribution, swrvefake.MeasuredLatency; else a fixed
// duration).
func startFake(name, latency string) (*providerFake, *latencies, error) {
	draw, l := latencyFunc(latency)
	if name == "fcm" {
		f, err := fcmfake.Start()
		if err != nil {
			return nil, nil, err
		}
		f.SetLatency(draw)
		acct, err := f.NewAccount("loadtest")
		if err != nil {
			f.Close()
			return nil, nil, err
		}
		return &providerFake{name: "fcm", url: f.URL(), provider: cluster.Provider{Name: "fcm", URL: f.URL(), FCMAccount: acct.JSON()},
			inFlight: f.InFlight, maxInFlight: f.MaxInflight, count: f.Sends,
			receipts: func() []receipt { return fcmReceipts(f.Log()) }, close: f.Close}, l, nil
	}
	f, err := swrvefake.Start()
	if err != nil {
		return nil, nil, err
	}
	f.SetLatency(draw)
	return &providerFake{name: "swrve", url: f.URL(), provider: cluster.Provider{Name: "swrve", URL: f.URL()}, inFlight: f.InFlight, maxInFlight: f.MaxInflight, count: f.Count,
		receipts: func() []receipt {
			log := f.Log()
			out := make([]receipt, len(log))
			for i, x := range log {
				out[i] = receipt{x.At, x.User}
			}
			return out
		}, close: f.Close}, l, nil
}

// fcmReceipts reads each FCM message's payload (data.body, base64url).
func fcmReceipts(log []fcmfake.Received) []receipt {
	out := make([]receipt, len(log))
	for i, x := range log {
		var m struct {
			Message struct {
				Android struct {
					Data map[string]string `json:"data"`
				} `json:"android"`
			} `json:"message"`
		}
		out[i].at = x.At
		if json.Unmarshal(x.Body, &m) == nil {
			b, _ := base64.RawURLEncoding.DecodeString(m.Message.Android.Data["body"])
			out[i].key = string(b)
		}
	}
	return out
}

// latencies records the fake's answer times.
type latencies struct {
	mu sync.Mutex
	h  *hdrhistogram.Histogram
}

func (l *latencies) summary() hist.Latency {
	l.mu.Lock()
	defer l.mu.Unlock()
	return hist.Summarize(l.h)
}

// latencyFunc is a fake's answer time (scenario.MeasuredSwrve: Swrve's measured
// distribution; else a fixed duration), each drawn recorded in l.
func latencyFunc(latency string) (func() time.Duration, *latencies) {
	draw := func() time.Duration { return 0 }
	if latency == scenario.MeasuredSwrve {
		draw = swrvefake.MeasuredLatency(rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())))
	} else if d, err := time.ParseDuration(latency); err == nil {
		draw = func() time.Duration { return d }
	}
	l := &latencies{h: hist.New()}
	return func() time.Duration {
		d := draw()
		l.mu.Lock()
		l.h.RecordValue(max(d.Microseconds(), 1))
		l.mu.Unlock()
		return d
	}, l
}
