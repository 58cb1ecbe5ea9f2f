package floor

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/gobwas/ws"
	"github.com/panjf2000/gnet/v2"
	"golang.org/x/sys/unix"
)

// The loop variant: the push variant's work on one gnet event loop, which
// serves both the user agents' websockets and the pushes' HTTP on one port,
// so that a push wakes one thread instead of handing off between
// goroutines: the floor of a push API run on the engine's event loops.
// Its HTTP is the least the load tester sends (Content-Length bodies,
// keep-alive); it is a measuring tool, not a server to expose.

// loopServer is the loop variant's gnet handler; every field is touched
// on its one loop only.
type loopServer struct {
	gnet.BuiltinEventEngine
	addr  chan string
	conns map[int]gnet.Conn
}

// loopConn is what a connection turned out to be.
type loopConn struct {
	ws bool // upgraded: the rest is websocket frames
	id int  // the user agent's number, once it said it (-1 before)
}

// serveLoop runs the loop variant; it prints one address for both.
func serveLoop() error {
	s := &loopServer{addr: make(chan string, 1), conns: map[int]gnet.Conn{}}
	errc := make(chan error, 1)
	go func() {
		errc <- gnet.Run(s, "tcp://127.0.0.1:0", gnet.WithMulticore(false), gnet.WithLogger(stderrLogger{}))
	}()
	select {
	case a := <-s.addr:
		fmt.Printf("%s %s\n", a, a)
	case err := <-errc:
		return err
	}
	return <-errc
}

func (s *loopServer) OnBoot(eng gnet.Engine) gnet.Action {
	fd, err := eng.Dup()
	if err != nil {
		return gnet.Shutdown
	}
	sa, err := unix.Getsockname(fd)
	unix.Close(fd)
	if a, ok := sa.(*unix.SockaddrInet4); ok && err == nil {
		s.addr <- net.JoinHostPort(net.IP(a.Addr[:]).String(), strconv.Itoa(a.Port))
	}
	return gnet.None
}

func (s *loopServer) OnOpen(c gnet.Conn) ([]byte, gnet.Action) {
	c.SetContext(&loopConn{id: -1})
	return nil, gnet.None
}

func (s *loopServer) OnClose(c gnet.Conn, _ error) gnet.Action {
	if lc, _ := c.Context().(*loopConn); lc != nil && lc.id >= 0 && s.conns[lc.id] == c {
		delete(s.conns, lc.id)
	}
	return gnet.None
}

var errShort = errors.New("floor: need more bytes")

// OnTraffic handles every whole request or frame buffered.
func (s *loopServer) OnTraffic(c gnet.Conn) gnet.Action {
	lc := c.Context().(*loopConn)
	for {
		buf, _ := c.Peek(-1)
		if len(buf) == 0 {
			return gnet.None
		}
		var n int
		var err error
		if lc.ws {
			n, err = s.frame(c, lc, buf)
		} else {
			n, err = s.request(c, lc, buf)
		}
		if errors.Is(err, errShort) {
			return gnet.None
		}
		if err != nil {
			return gnet.Close
		}
		c.Discard(n)
	}
}

// maxRequest bounds what one request or frame may buffer.
const maxRequest = 64 << 10

// request handles one HTTP request at the start of buf: the upgrade, a
// push or /held. It returns the bytes it used.
func (s *loopServer) request(c gnet.Conn, lc *loopConn, buf []byte) (int, error) {
	method, path, head, n, err := parseRequest(buf)
	if err != nil {
		return 0, err
	}
	switch {
	case method == "GET" && path == "/":
		// The upgrade: gobwas/ws reads the request it needs from head.
		if _, err := (ws.Upgrader{}).Upgrade(struct {
			io.Reader
			io.Writer
		}{bytes.NewReader(head), c}); err != nil {
			return 0, err
		}
		lc.ws = true
	case path == "/held":
		body := strconv.Itoa(len(s.conns))
		c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body))
	default:
		id, _ := strconv.Atoi(strings.TrimPrefix(path, "/push/"))
		status := "404 Not Found"
		if uc := s.conns[id]; uc != nil {
			status = "410 Gone"
			if _, err := uc.Write(notificationFrame); err == nil {
				status = "201 Created"
			}
		}
		c.Write([]byte("HTTP/1.1 " + status + "\r\nContent-Length: 0\r\n\r\n"))
	}
	return n, nil
}

// parseRequest reads the HTTP/1.1 request at the start of buf: its method
// and path, its head (through the blank line) and its length with the
// body (Content-Length; no chunks). errShort: not all of it is there yet.
func parseRequest(buf []byte) (method, path string, head []byte, n int, err error) {
	end := bytes.Index(buf, []byte("\r\n\r\n"))
	if end < 0 {
		if len(buf) > maxRequest {
			return "", "", nil, 0, errors.New("floor: header too long")
		}
		return "", "", nil, 0, errShort
	}
	head = buf[:end+4]
	line, _, _ := bytes.Cut(head, []byte("\r\n"))
	f := bytes.Fields(line)
	if len(f) != 3 || !bytes.HasPrefix(f[2], []byte("HTTP/1.")) {
		return "", "", nil, 0, errors.New("floor: bad request line")
	}
	size := 0
	for _, h := range bytes.Split(head, []byte("\r\n")) {
		k, v, ok := bytes.Cut(h, []byte(":"))
		if !ok || !bytes.EqualFold(bytes.TrimSpace(k), []byte("Content-Length")) {
			continue
		}
		if size, err = strconv.Atoi(string(bytes.TrimSpace(v))); err != nil || size < 0 || size > maxRequest {
			return "", "", nil, 0, errors.New("floor: bad Content-Length")
		}
	}
	if len(buf) < len(head)+size {
		return "", "", nil, 0, errShort
	}
	return string(f[0]), string(f[1]), head, len(head) + size, nil
}

// frame reads one client frame at the start of buf: the first says the
// user agent's number, the rest are acks.
func (s *loopServer) frame(c gnet.Conn, lc *loopConn, buf []byte) (int, error) {
	op, payload, n, err := parseFrame(buf)
	if err != nil {
		return 0, err
	}
	if op == ws.OpClose {
		return 0, io.EOF
	}
	if lc.id < 0 {
		id, err := strconv.Atoi(string(payload))
		if err != nil || id < 0 {
			return 0, fmt.Errorf("floor: user agent number %q", payload)
		}
		lc.id = id
		s.conns[id] = c
	}
	return n, nil
}

// parseFrame reads the websocket frame at the start of buf: its opcode,
// its unmasked payload (a copy) and its length. errShort: not all of it is
// there yet.
func parseFrame(buf []byte) (op ws.OpCode, payload []byte, n int, err error) {
	r := bytes.NewReader(buf)
	h, err := ws.ReadHeader(r)
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return 0, nil, 0, errShort
	}
	if err != nil {
		return 0, nil, 0, fmt.Errorf("floor: frame: %w", err)
	}
	if h.Length > maxRequest {
		return 0, nil, 0, errors.New("floor: frame too long")
	}
	hl := len(buf) - r.Len()
	if int64(r.Len()) < h.Length {
		return 0, nil, 0, errShort
	}
	payload = append([]byte(nil), buf[hl:hl+int(h.Length)]...)
	if h.Masked {
		ws.Cipher(payload, h.Mask, 0)
	}
	return h.OpCode, payload, hl + int(h.Length), nil
}

// stderrLogger keeps gnet's log off stdout, where the parent reads the
// address; its warnings and errors go to stderr.
type stderrLogger struct{}

func (stderrLogger) Debugf(string, ...any) {}
func (stderrLogger) Infof(string, ...any)  {}
func (stderrLogger) Warnf(f string, a ...any) {
	fmt.Fprintf(os.Stderr, "gnet: "+f+"\n", a...)
}
func (stderrLogger) Errorf(f string, a ...any) {
	fmt.Fprintf(os.Stderr, "gnet: "+f+"\n", a...)
}
func (stderrLogger) Fatalf(f string, a ...any) {
	fmt.Fprintf(os.Stderr, "gnet: "+f+"\n", a...)
	os.Exit(1)
}
