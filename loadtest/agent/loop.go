package agent

import (
	"container/heap"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sync"

	"golang.org/x/sys/unix"
)

// loop is one epoll event loop of a worker. It owns its user agents: their
// sockets, state and timers are touched only by the loop's goroutine.
// Other goroutines reach them through post (goroutine-safe) or call.
type loop struct {
	s      *Set
	epfd   int
	wakeFD int // an eventfd: post writes it to wake the loop
	byFD   []*ua
	uas    []*ua // the user agents this loop owns
	buf    []byte
	frame  []byte // scratch for outbound frames
	text   []byte // scratch for outbound messages
	timers timerHeap
	now    int64 // worker clock, refreshed after each wait and read
	rng    *rand.Rand
	churn  *Churn // non-nil while user agents cycle

	mu    sync.Mutex
	queue []func()
	done  chan struct{}
	stop  bool
}

// readBufSize is the loop's read buffer: a burst of notifications for one
// user agent fits.
const readBufSize = 64 << 10

func newLoop(s *Set, seed uint64) (*loop, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("loadtest: epoll_create: %w", err)
	}
	wfd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		unix.Close(epfd)
		return nil, fmt.Errorf("loadtest: eventfd: %w", err)
	}
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, wfd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(wfd)}); err != nil {
		unix.Close(epfd)
		unix.Close(wfd)
		return nil, fmt.Errorf("loadtest: epoll_ctl eventfd: %w", err)
	}
	return &loop{
		s: s, epfd: epfd, wakeFD: wfd,
		buf:  make([]byte, readBufSize),
		rng:  rand.New(rand.NewPCG(seed, seed^0x5DEECE66D)),
		done: make(chan struct{}),
	}, nil
}

// post runs fn on the loop. Goroutine-safe; never blocks on the loop.
func (l *loop) post(fn func()) {
	l.mu.Lock()
	l.queue = append(l.queue, fn)
	first := len(l.queue) == 1
	l.mu.Unlock()
	if first {
		var one [8]byte
		binary.NativeEndian.PutUint64(one[:], 1)
		unix.Write(l.wakeFD, one[:])
	}
}

// call runs fn on the loop and waits for it.
func (l *loop) call(fn func()) {
	ran := make(chan struct{})
	l.post(func() { fn(); close(ran) })
	select {
	case <-ran:
	case <-l.done:
	}
}

// run is the loop's goroutine; it returns after shutdown was posted.
func (l *loop) run() {
	defer close(l.done)
	events := make([]unix.EpollEvent, 512)
	for !l.stop {
		n, err := unix.EpollWait(l.epfd, events, l.waitMS())
		if err != nil && err != unix.EINTR {
			l.s.env.Fatal(fmt.Errorf("loadtest: epoll_wait: %w", err))
			return
		}
		l.now = l.s.env.Clock.Now()
		for i := range max(n, 0) {
			fd := int(events[i].Fd)
			if fd == l.wakeFD {
				var b [8]byte
				unix.Read(l.wakeFD, b[:])
				continue
			}
			if fd < len(l.byFD) && l.byFD[fd] != nil {
				l.byFD[fd].event(events[i].Events)
			}
		}
		l.runQueue()
		l.fireTimers()
	}
	for _, u := range l.uas {
		if u.fd >= 0 {
			unix.Close(int(u.fd))
			u.fd = -1
		}
	}
	unix.Close(l.epfd)
	unix.Close(l.wakeFD)
}

// shutdown stops the loop, closing every socket without a handshake.
func (l *loop) shutdown() {
	l.post(func() { l.stop = true })
	<-l.done
}

func (l *loop) runQueue() {
	l.mu.Lock()
	q := l.queue
	l.queue = nil
	l.mu.Unlock()
	for _, fn := range q {
		fn()
	}
}

// waitMS is how long epoll may sleep: until the next timer, at most 1s.
func (l *loop) waitMS() int {
	if len(l.timers) == 0 {
		return 1000
	}
	d := l.timers[0].at - l.s.env.Clock.Now()
	if d <= 0 {
		return 0
	}
	return int(min((d+999_999)/1_000_000, 1000))
}

// add registers fd for u.
func (l *loop) add(fd int, u *ua, events uint32) error {
	for fd >= len(l.byFD) {
		l.byFD = append(l.byFD, make([]*ua, max(len(l.byFD), 1024))...)
	}
	l.byFD[fd] = u
	return unix.EpollCtl(l.epfd, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: events, Fd: int32(fd)})
}

func (l *loop) modify(fd int, events uint32) {
	unix.EpollCtl(l.epfd, unix.EPOLL_CTL_MOD, fd, &unix.EpollEvent{Events: events, Fd: int32(fd)})
}

// remove forgets fd and closes it.
func (l *loop) remove(fd int) {
	unix.EpollCtl(l.epfd, unix.EPOLL_CTL_DEL, fd, nil)
	l.byFD[fd] = nil
	unix.Close(fd)
}

// setTimer makes at the user agent's one deadline, replacing any other.
func (l *loop) setTimer(u *ua, at int64) {
	u.tgen++
	heap.Push(&l.timers, timer{at: at, u: u, gen: u.tgen})
}

// clearTimer cancels the user agent's deadline.
func (l *loop) clearTimer(u *ua) { u.tgen++ }

func (l *loop) fireTimers() {
	for len(l.timers) > 0 && l.timers[0].at <= l.now {
		t := heap.Pop(&l.timers).(timer)
		if t.gen == t.u.tgen {
			t.u.tgen++
			t.u.timeout()
		}
	}
}

// scratch is the loop's buffer for building a message.
func (l *loop) scratch() []byte { return l.text[:0] }

// jitter returns d ± 10%.
func (l *loop) jitter(d int64) int64 { return d - d/10 + l.rng.Int64N(d/5+1) }

// exp draws an exponentially distributed duration with the given mean.
func (l *loop) exp(mean int64) int64 { return int64(l.rng.ExpFloat64() * float64(mean)) }

// mask is a fresh websocket masking key.
func (l *loop) mask() [4]byte {
	var m [4]byte
	binary.LittleEndian.PutUint32(m[:], l.rng.Uint32())
	return m
}

// timer is one deadline; a stale one (gen no longer the user agent's) is
// dropped when it comes up, so re-arming costs no search.
type timer struct {
	at  int64
	u   *ua
	gen uint32
}

type timerHeap []timer

func (h timerHeap) Len() int           { return len(h) }
func (h timerHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h timerHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *timerHeap) Push(x any)        { *h = append(*h, x.(timer)) }
func (h *timerHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	*h = old[:len(old)-1]
	return t
}
