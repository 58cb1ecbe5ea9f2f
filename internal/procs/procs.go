package procs

import (
	"os"
	"runtime"
)

// ForLoops sets GOMAXPROCS for a process that runs a node with eventLoops
// gnet event loops (0: gnet's default, one per CPU): the Go scheduler's
// processors become the cores it had plus one per loop and one for the
// loop that accepts connections. It returns those cores, what the node's
// Go code may use at once (gctune measures the collector's share against
// them). A GOMAXPROCS environment variable is left in charge: then
// nothing changes.
//
// Why: each loop waits for events in epoll_wait, a blocking system call
// made while holding a processor. With the other processors busy, Go's
// monitor thread takes that processor back after 20 µs, every time a
// loop waits, and a monitor that took one keeps waking every 20 µs: at
// 1,000 pushes/s it was over a third of the node's CPU (perf, 2 cores).
// A processor per loop leaves the others free, so a waiting loop's is
// only taken after 10 ms, and the monitor sleeps.
func ForLoops(eventLoops int) (cores int) {
	cores = runtime.GOMAXPROCS(0)
	if _, set := os.LookupEnv("GOMAXPROCS"); set {
		return cores
	}
	loops := eventLoops
	if loops <= 0 {
		loops = runtime.NumCPU() // gnet's multicore default
	}
	runtime.GOMAXPROCS(cores + loops + 1)
	return cores
}
