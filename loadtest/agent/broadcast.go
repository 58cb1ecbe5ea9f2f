package agent

import (
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/autopush-go/autopush/loadtest/hist"
)

// Broadcasts as Firefox follows them: a user agent names Settings.Broadcasts
// in its hello (at version "0", so the reply tells it the current one) and
// then takes "broadcast" messages. The run's Megaphone names each version
// "t<unix ns of the change>", so a user agent measures how long a change
// took to reach it, and notices one it was sent twice.

// VersionAt is the broadcast version the load tester publishes for a
// change made at the wall-clock instant at (Unix ns).
func VersionAt(at int64) string { return "t" + strconv.FormatInt(at, 10) }

// versionTime reads VersionAt back; false for another version.
func versionTime(v string) (int64, bool) {
	s, ok := strings.CutPrefix(v, "t")
	if !ok {
		return 0, false
	}
	at, err := strconv.ParseInt(s, 10, 64)
	return at, err == nil
}

// broadcasts is what the user agents of a Set measured.
type broadcasts struct {
	mu        sync.Mutex
	received  int64 // "broadcast" messages with a newer version
	repeated  int64 // a version the user agent already had
	latencies *hdrhistogram.Histogram
}

// BroadcastResult is what TakeBroadcasts returns.
type BroadcastResult struct {
	Received int64  `json:"received"` // changes that reached a user agent (one per user agent per change)
	Repeated int64  `json:"repeated"` // a version sent to a user agent that already had it
	Hist     []byte `json:"hist"`     // change to arrival (hist.Encode)
	// Ready and Current count the connected user agents, and those of
	// them that have the version current at the instant the call named
	// (or a later one).
	Ready, Current int64
}

// TakeBroadcasts returns what arrived since the last call and starts
// over, and how many connected user agents have the version made at
// current (VersionAt's instant; 0: do not count). Safe for concurrent
// use.
func (s *Set) TakeBroadcasts(current int64) BroadcastResult {
	var r BroadcastResult
	if current != 0 {
		for _, l := range s.loops {
			l.call(func() {
				for _, u := range l.uas {
					if u.state == stReady {
						r.Ready++
						if u.bseen >= current {
							r.Current++
						}
					}
				}
			})
		}
	}
	b := &s.bcast
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.latencies == nil {
		b.latencies = hist.New()
	}
	r.Received, r.Repeated, r.Hist = b.received, b.repeated, hist.Encode(b.latencies)
	b.received, b.repeated = 0, 0
	b.latencies.Reset()
	return r
}

// appendHelloBroadcasts appends the hello's "broadcasts" object.
func (u *ua) appendHelloBroadcasts(b []byte) []byte {
	b = append(b, `"broadcasts":{`...)
	for i, id := range u.l.s.cfg.Broadcasts {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, id)
		b = append(b, `:"0"`...)
	}
	return append(b, '}')
}

// noteBroadcasts takes the versions of a hello reply (fanOut false: the
// user agent asked) or of a "broadcast" message (a change reaching it).
func (u *ua) noteBroadcasts(raw []broadcastValue, fanOut bool) {
	var newest int64
	for _, b := range raw {
		id, v := b.id, b.raw
		if id == "errors" {
			u.l.s.reason("broadcast: unknown id")
			continue
		}
		var s string
		if json.Unmarshal(v, &s) != nil {
			continue
		}
		if at, ok := versionTime(s); ok && at > newest {
			newest = at
		}
	}
	if newest == 0 || !fanOut {
		u.bseen = max(u.bseen, newest)
		return
	}
	b := &u.l.s.bcast
	b.mu.Lock()
	defer b.mu.Unlock()
	if newest <= u.bseen {
		b.repeated++
		return
	}
	u.bseen = newest
	b.received++
	if b.latencies == nil {
		b.latencies = hist.New()
	}
	b.latencies.RecordValue(max((time.Now().UnixNano()-newest)/1e3, 1)) // µs, as every histogram here
}
