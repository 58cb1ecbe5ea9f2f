package floor

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"
	"golang.org/x/sys/unix"
)

const (
	serverEnv = "LOADTEST_FLOOR_SERVER" // the variant this process serves
	dirEnv    = "LOADTEST_FLOOR_DIR"    // where synced writes its file
)

// IsServer reports whether this process was started as a floor server.
func IsServer() bool { return os.Getenv(serverEnv) != "" }

// notification is the frame each push writes: a notification of the size
// a small encrypted push makes.
var notification = []byte(`{"messageType":"notification","channelID":"6ba7b810-9dad-11d1-80b4-00c04fd430c8","version":"gAAAAABnWq0Z7mFqvVbU1xO6k9B5-y8","data":"` +
	strings.Repeat("A", 120) + `","headers":{"encoding":"aes128gcm"}}`)

// notificationFrame is notification as one server frame, written with one
// write as a server that buffers its frames would.
var notificationFrame = ws.MustCompileFrame(ws.NewTextFrame(notification))

// recordSize is what synced writes and syncs per push.
const recordSize = 400

// Serve runs the server the environment names: it prints its websocket
// and HTTP addresses on one line of stdout and serves until it is killed
// (SIGTERM's default), or fails.
func Serve() error {
	variant := os.Getenv(serverEnv)
	if variant == "loop" {
		return serveLoop()
	}
	var log *syncLog
	if variant == "synced" {
		var err error
		if log, err = openSyncLog(filepath.Join(os.Getenv(dirEnv), "records")); err != nil {
			return err
		}
	}
	wl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	uas := &held{conns: map[int]*uaConn{}}
	go uas.accept(wl)
	hs := &http.Server{
		Handler:           uas.handler(variant, log),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      10 * time.Second,
		IdleTimeout:       time.Minute,
	}
	fmt.Printf("%s %s\n", wl.Addr(), hl.Addr())
	return hs.Serve(hl)
}

// held are the server's websocket connections by the number each said.
type held struct {
	mu    sync.RWMutex
	conns map[int]*uaConn
}

type uaConn struct {
	mu sync.Mutex // one frame written at a time
	c  net.Conn
}

func (h *held) accept(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go h.serve(c)
	}
}

// serve upgrades c, files it under the number it sends first, and reads
// its acks until it closes.
func (h *held) serve(c net.Conn) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := ws.Upgrade(c); err != nil {
		return
	}
	msg, err := wsutil.ReadClientText(c)
	if err != nil {
		return
	}
	id, err := strconv.Atoi(string(msg))
	if err != nil {
		return
	}
	c.SetDeadline(time.Time{})
	h.mu.Lock()
	h.conns[id] = &uaConn{c: c}
	h.mu.Unlock()
	// Buffered: a frame's header and payload in one read.
	rw := struct {
		io.Reader
		io.Writer
	}{bufio.NewReaderSize(c, 1024), c}
	for {
		if _, err := wsutil.ReadClientText(rw); err != nil {
			return
		}
	}
}

func (h *held) handler(variant string, log *syncLog) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/held" {
			h.mu.RLock()
			n := len(h.conns)
			h.mu.RUnlock()
			io.WriteString(w, strconv.Itoa(n))
			return
		}
		io.Copy(io.Discard, r.Body)
		if variant == "http" {
			w.WriteHeader(http.StatusCreated)
			return
		}
		id, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/push/"))
		h.mu.RLock()
		uc := h.conns[id]
		h.mu.RUnlock()
		if uc == nil {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		if log != nil {
			if err := log.append(); err != nil {
				w.WriteHeader(http.StatusInternalServerError)
				return
			}
		}
		uc.mu.Lock()
		_, err := uc.c.Write(notificationFrame)
		uc.mu.Unlock()
		if err != nil {
			w.WriteHeader(http.StatusGone)
			return
		}
		w.WriteHeader(http.StatusCreated)
	})
}

// syncLog appends records to a file and fdatasyncs them, one sync for all
// the records waiting when the last one finished (group commit).
type syncLog struct {
	f       *os.File
	waiting chan chan error
}

func openSyncLog(path string) (*syncLog, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	l := &syncLog{f: f, waiting: make(chan chan error, 4096)}
	go l.run()
	return l, nil
}

// append returns once a record of its own is on disk.
func (l *syncLog) append() error {
	done := make(chan error, 1)
	l.waiting <- done
	return <-done
}

func (l *syncLog) run() {
	buf := make([]byte, 0, 64*recordSize)
	var batch []chan error
	for first := range l.waiting {
		batch = append(batch[:0], first)
	more:
		for {
			select {
			case d := <-l.waiting:
				batch = append(batch, d)
			default:
				break more
			}
		}
		n := len(batch) * recordSize
		buf = slices.Grow(buf[:0], n)[:n]
		_, err := l.f.Write(buf)
		if err == nil {
			err = unix.Fdatasync(int(l.f.Fd()))
		}
		for _, d := range batch {
			d <- err
		}
	}
}
