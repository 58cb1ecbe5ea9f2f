package listener

import (
	"errors"
	"fmt"
	"net"
	"syscall"
)

// ListenError is a listener that could not open, naming the setting that
// holds its address: a node's start fails with it, and the operator
// learns what to change rather than a bare bind error. A second node
// started on the same host with the defaults meets one for each address
// it shares with the first (the default metrics-listen, 127.0.0.1:8084,
// is the one easily forgotten).
type ListenError struct {
	// Tier names whose setting it is ("autoconnect"), and Setting the
	// setting holding the address ("metrics-listen"): a process that runs
	// several tiers, under names of its own for some of their settings,
	// renames it.
	Tier, Setting string
	Addr          string
	// Off, when set, says how the listener is turned off instead
	// (metrics-listen: `""`).
	Off string
	Err error
}

// Listen listens on TCP addr, which the tier's setting holds.
func Listen(tier, setting, addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, &ListenError{Tier: tier, Setting: setting, Addr: addr, Err: err}
	}
	return ln, nil
}

func (e *ListenError) Error() string {
	if !errors.Is(e.Err, syscall.EADDRINUSE) {
		return fmt.Sprintf("%s %s: %v", e.Setting, e.Addr, e.Err)
	}
	msg := fmt.Sprintf("%s %s: address already in use by another process (a second node on this host needs addresses of its own); "+
		"set %s to a free address (port 0: any free port, logged at start)", e.Setting, e.Addr, e.Setting)
	if e.Off != "" {
		msg += ", or to " + e.Off + " to turn it off"
	}
	return msg
}

func (e *ListenError) Unwrap() error { return e.Err }
