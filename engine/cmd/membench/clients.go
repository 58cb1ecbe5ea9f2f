// Command membench measures the connection node's memory per idle
// connection: it starts the autoconnect binary as a child process on the
// embedded store, opens N websocket connections to it from this process
// (hello plus one register each, then idle), and prints the engine's
// user-space RSS per connection and its goroutine count.
//
//	go run ./engine/cmd/membench -n 19000
//
// Budget (the engine's memory issue): at most 1 KiB of RSS per connection,
// and a goroutine count that does not grow with connections. The figure is
// the least-squares slope of RSS over the measurement points (0, N/steps,
// ..., N connections), so the process's fixed cost does not count. The
// exit status is 0 within budget, 1 over it, 2 when the benchmark itself
// failed.
//
// Where the numbers come from, all read from outside the engine:
//   - RSS: /proc/<pid>/smaps_rollup (Rss, and Anonymous, the heap and
//     other private memory; the rest is file-backed, mostly the binary);
//   - goroutines: go_goroutines on the engine's /metrics when it exports
//     it, else the runtime's GODEBUG=scheddetail=1 dump on the child's
//     stderr (live goroutines, runtime system goroutines included);
//   - live heap: the runtime's GODEBUG=gctrace=1 line of the last GC
//     (whole MB; Go collects only when it allocates, and at least every two
//     minutes).
//
// AUTOCONNECT__* variables in membench's environment override the
// engine's settings (for instance AUTOCONNECT__STORAGE=scylla with
// AUTOCONNECT__CQL_HOSTS, AUTOCONNECT__CQL_KEYSPACE and
// AUTOCONNECT__CQL_CONSISTENCY=ONE, to keep the embedded store's memtables
// out of the measured process).
//
// The Go runtime cannot be made to collect from outside, so each point is
// measured after -hold of idleness, as the median of -samples samples one
// second apart.
package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gobwas/ws"
)

// clients are the idle websocket connections. Once set up a connection is
// only held: no goroutine, no reads (the engine is told not to ping).
type clients struct {
	addr  string
	mu    sync.Mutex
	conns []net.Conn
}

func (c *clients) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.conns)
}

// openUpTo sets up connections until target are open, concurrency at a
// time.
func (c *clients) openUpTo(ctx context.Context, target, concurrency int) error {
	start := c.count()
	if target <= start {
		return nil
	}
	var next atomic.Int64
	next.Store(int64(start))
	var wg sync.WaitGroup
	var once sync.Once
	var firstErr error
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for range min(concurrency, target-start) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= target || ctx.Err() != nil {
					return
				}
				conn, err := openClient(ctx, c.addr, i)
				if err != nil {
					once.Do(func() { firstErr = fmt.Errorf("connection %d: %w", i, err); cancel() })
					return
				}
				c.mu.Lock()
				c.conns = append(c.conns, conn)
				c.mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if firstErr == nil && ctx.Err() != nil {
		firstErr = ctx.Err()
	}
	return firstErr
}

func (c *clients) closeAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, conn := range c.conns {
		conn.Close()
	}
	c.conns = nil
}

// openClient connects from 127.0.0.(2+i%250), so that 250 source
// addresses share the ephemeral ports, upgrades, says hello, registers
// one channel and returns the idle connection.
func openClient(ctx context.Context, addr string, i int) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	nd := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(2+i%250))}}
	d := ws.Dialer{
		Protocols: []string{"push-notification"},
		NetDial: func(ctx context.Context, network, a string) (net.Conn, error) {
			return nd.DialContext(ctx, network, a)
		},
	}
	conn, br, _, err := d.Dial(ctx, "ws://"+addr+"/")
	if err != nil {
		return nil, fmt.Errorf("upgrade: %w", err)
	}
	if br != nil {
		conn.Close()
		return nil, errors.New("server sent data before hello")
	}
	ok := false
	defer func() {
		if !ok {
			conn.Close()
		}
	}()
	if dl, has := ctx.Deadline(); has {
		conn.SetDeadline(dl)
	}
	var reply struct {
		MessageType string `json:"messageType"`
		Status      int    `json:"status"`
		UAID        string `json:"uaid"`
	}
	if err := exchange(conn, `{"messageType":"hello","use_webpush":true,"broadcasts":{}}`, &reply); err != nil {
		return nil, fmt.Errorf("hello: %w", err)
	}
	if reply.MessageType != "hello" || reply.Status != 200 || reply.UAID == "" {
		return nil, fmt.Errorf("hello reply %+v", reply)
	}
	reply = struct {
		MessageType string `json:"messageType"`
		Status      int    `json:"status"`
		UAID        string `json:"uaid"`
	}{}
	if err := exchange(conn, `{"messageType":"register","channelID":"`+newUUID()+`"}`, &reply); err != nil {
		return nil, fmt.Errorf("register: %w", err)
	}
	if reply.MessageType != "register" || reply.Status != 200 {
		return nil, fmt.Errorf("register reply %+v", reply)
	}
	conn.SetDeadline(time.Time{})
	ok = true
	return conn, nil
}

// exchange sends one masked text frame and decodes the next text frame.
func exchange(conn net.Conn, msg string, reply any) error {
	f := ws.MaskFrameInPlace(ws.NewTextFrame([]byte(msg)))
	if err := ws.WriteFrame(conn, f); err != nil {
		return err
	}
	for {
		h, err := ws.ReadHeader(conn)
		if err != nil {
			return err
		}
		if h.Length > 1<<20 {
			return fmt.Errorf("server frame of %d bytes", h.Length)
		}
		payload := make([]byte, h.Length)
		if _, err := io.ReadFull(conn, payload); err != nil {
			return err
		}
		switch h.OpCode {
		case ws.OpText:
			return json.Unmarshal(payload, reply)
		case ws.OpClose:
			code, reason := ws.ParseCloseFrameData(payload)
			return fmt.Errorf("closed by the engine: %d %s", code, reason)
		}
	}
}

// newUUID is a random (version 4) UUID in the dashed form.
func newUUID() string {
	var u [16]byte
	rand.Read(u[:])
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}
