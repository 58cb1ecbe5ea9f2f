package embedded

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// LockedError is Open's error when another process holds the data
// directory (Pebble's lock on its LOCK file): a second node on the same
// directory, or a tool run against a live node's data. It names that
// process and what to do instead.
type LockedError struct {
	Dir string
	// PID is the holder's process id; 0 when it could not be learned (a
	// process in another PID namespace, such as a container's).
	PID int
	// Command is the holder's program, without its arguments ("" when
	// unknown).
	Command string
	Err     error // the lock call's error
}

// LiveDiagnosis is what the message tells to do instead of opening a
// live node's data: the node's admin route that serves the same endpoint
// diagnosis (internal/endpointdiag.Route) on its metrics-listen.
const LiveDiagnosis = "GET /__endpoint__?endpoint=<endpoint URL> on its metrics-listen, with Authorization: Bearer <admin-tokens>"

func (e *LockedError) Error() string {
	who := "another process"
	if e.PID > 0 {
		who = "process " + strconv.Itoa(e.PID)
		if e.Command != "" {
			who += " (" + e.Command + ")"
		}
	}
	return fmt.Sprintf("embedded: data-dir %s is in use by %s: stop it first, or ask the live node (%s; docs/operations.md, "+
		"Diagnosing an endpoint); a second node on this host needs a data-dir of its own: %v", e.Dir, who, LiveDiagnosis, e.Err)
}

func (e *LockedError) Unwrap() error { return e.Err }

// lockHolder learns who holds dir's lock: Pebble locks its LOCK file with
// fcntl (F_SETLK), so F_GETLK reports the holder's PID. Only called when
// the lock is another process's: a process closing any descriptor of a
// file drops its own fcntl locks on it, and this one holds none there.
func lockHolder(dir string) (pid int, program string) {
	f, err := os.Open(filepath.Join(dir, "LOCK"))
	if err != nil {
		return 0, ""
	}
	defer f.Close()
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: io.SeekStart}
	if err := unix.FcntlFlock(f.Fd(), unix.F_GETLK, &lk); err != nil || lk.Type == unix.F_UNLCK || lk.Pid <= 0 {
		return 0, ""
	}
	return int(lk.Pid), command(int(lk.Pid))
}

// command is pid's program as it was started (argv[0], from /proc), ""
// when it cannot be read. Not its arguments: flags may carry secrets
// (-crypto-key), and the message is logged.
func command(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return ""
	}
	argv0, _, _ := bytes.Cut(b, []byte{0})
	if len(argv0) > 200 {
		argv0 = append(argv0[:197:197], "..."...)
	}
	return string(argv0)
}
