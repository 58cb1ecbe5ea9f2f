package proc

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"time"
)

// Running reports whether pid is a live process. A zombie is not: it has
// exited, and a process that is not our child (a Cassandra node, a
// server started by a script) may stay one until whatever reaps orphans
// gets to it.
func Running(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	return err == nil && !bytes.Contains(b, []byte("State:\tZ"))
}

// WaitGone waits until pid is no longer Running, polling every 20ms, or
// until ctx ends.
func WaitGone(ctx context.Context, pid int) error {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for Running(pid) {
		select {
		case <-ctx.Done():
			return fmt.Errorf("pid %d still runs: %w", pid, ctx.Err())
		case <-t.C:
		}
	}
	return nil
}
