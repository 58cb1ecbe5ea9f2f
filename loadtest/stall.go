package loadtest

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/autopush-go/autopush/loadtest/report"
)

// The -stalls run of notify: connections to the push API that send part
// of a request and then nothing, or the rest too slowly, a fifth each
// stopping mid-header, after a whole header (no body byte), mid-body
// (Content-Length), mid-chunk (a chunked body without its last chunk),
// and sending its body one byte a second, held while the rate is offered
// again. The endpoint must close every one within its request-timeout
// (from the connection's first byte, here its accept) plus a second, and
// the well-behaved pushes keep their latency. The load tester's own
// process, which holds them, runs at nice 10 from then on: an attacker's
// CPU is elsewhere, and on two cores its bursts (5,000 connections opened,
// then closed by the server, at once) would otherwise be the measure.

// stallHead is a push's header up to its framing header.
const stallHead = "POST /wpush/v1/stalled HTTP/1.1\r\nHost: loadtest\r\nTTL: 60\r\nContent-Encoding: aes128gcm\r\n"

// stallKinds are where a stalled connection stops: what it sends at
// once, and what it then sends one byte a second.
var stallKinds = []struct{ name, sent, drip string }{
	{"header", stallHead + "Content-Le", ""},
	{"header+0", stallHead + "Content-Length: 100\r\n\r\n", ""},
	{"body", stallHead + "Content-Length: 100\r\n\r\n0123456789", ""},
	{"chunk", stallHead + "Transfer-Encoding: chunked\r\n\r\n10\r\n01234567", ""},
	{"1 byte/s", stallHead + "Content-Length: 100\r\n\r\n", strings.Repeat("d", 100)},
}

// stallsPerSource bounds the stalled connections from one address
// (127.0.1.x), under the endpoint's max-connections-per-source (256 by
// default): the run measures the timeouts, not the cap.
const stallsPerSource = 200

// stallSource is the address stalled connection i connects from.
func stallSource(i int) net.IP { return net.IPv4(127, 0, 1, byte(1+i/stallsPerSource%250)) }

// stalls holds n stalled connections to the endpoint until each is
// closed by it (or wait passes); done reports them.
type stalls struct {
	wg      sync.WaitGroup
	mu      sync.Mutex
	closes  []time.Duration // per connection: connect to close; -1: never closed
	kinds   []int
	failure error
}

func startStalls(ctx context.Context, endpointURL string, n int, wait time.Duration) (*stalls, error) {
	u, err := url.Parse(endpointURL)
	if err != nil {
		return nil, fmt.Errorf("loadtest: stalls: %w", err)
	}
	s := &stalls{closes: make([]time.Duration, n), kinds: make([]int, n)}
	for i := range n {
		kind := i % len(stallKinds)
		d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: stallSource(i)}}
		start := time.Now()
		c, err := d.DialContext(ctx, "tcp", u.Host)
		if err != nil {
			s.wg.Wait()
			return nil, fmt.Errorf("loadtest: stall connection %d: %w", i, err)
		}
		s.kinds[i] = kind
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer c.Close()
			if _, err := io.WriteString(c, stallKinds[kind].sent); err != nil {
				s.fail(fmt.Errorf("stall %d: write: %w", i, err))
			}
			if drip := stallKinds[kind].drip; drip != "" {
				go dripBytes(c, drip)
			}
			// Read (and drop) the endpoint's answer until it closes.
			c.SetReadDeadline(start.Add(wait))
			_, err := io.Copy(io.Discard, c)
			took := time.Since(start)
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				took = -1
			}
			s.mu.Lock()
			s.closes[i] = took
			s.mu.Unlock()
		}()
	}
	return s, nil
}

func (s *stalls) fail(err error) {
	s.mu.Lock()
	if s.failure == nil {
		s.failure = err
	}
	s.mu.Unlock()
}

// finish waits for every stalled connection and fills st.
func (s *stalls) finish(st *report.StallStage, limit time.Duration) error {
	s.wg.Wait()
	st.Stalls, st.LimitS, st.Slowest = len(s.closes), limit.Seconds(), map[string]float64{}
	for i, d := range s.closes {
		name := stallKinds[s.kinds[i]].name
		if d < 0 {
			st.Slowest[name] = -1
			continue
		}
		if d <= limit {
			st.Closed++
		}
		st.CloseMaxS = max(st.CloseMaxS, d.Seconds())
		if cur, ok := st.Slowest[name]; !ok || cur >= 0 && d.Seconds() > cur {
			st.Slowest[name] = d.Seconds()
		}
	}
	return s.failure
}

// dripBytes writes p to c one byte a second until it is written or c is
// closed.
func dripBytes(c net.Conn, p string) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for i := range len(p) {
		<-tick.C
		c.SetWriteDeadline(time.Now().Add(time.Second))
		if _, err := io.WriteString(c, p[i:i+1]); err != nil {
			return
		}
	}
}

// stallNice is the scheduling priority the load tester's own process
// takes while it holds the stalled connections (the server and the
// workers keep theirs, 0).
const stallNice = 10

// niceThreads sets every thread of this process to nice n (Linux nice is
// per thread; threads made later inherit it from the thread making them).
func niceThreads(n int) error {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return err
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if err := syscall.Setpriority(syscall.PRIO_PROCESS, tid, n); err != nil {
			return fmt.Errorf("nice thread %d: %w", tid, err)
		}
	}
	return nil
}
