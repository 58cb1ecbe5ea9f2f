package engine

import (
	"fmt"
	"syscall"
)

// fdReserve is kept back from the fd ceiling for listeners, storage
// connections, log files and the node API.
const fdReserve = 256

// raiseFDLimit lifts the soft open-files limit to the hard one and
// returns the new limit: the connection ceiling of this process.
func raiseFDLimit() (uint64, error) {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0, fmt.Errorf("engine: getrlimit: %w", err)
	}
	if l.Cur < l.Max {
		l.Cur = l.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
			return 0, fmt.Errorf("engine: setrlimit: %w", err)
		}
	}
	return l.Cur, nil
}

// listenPort returns the local port of a listening socket fd.
func listenPort(fd int) (int, error) {
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		return 0, err
	}
	switch a := sa.(type) {
	case *syscall.SockaddrInet4:
		return a.Port, nil
	case *syscall.SockaddrInet6:
		return a.Port, nil
	}
	return 0, fmt.Errorf("engine: unexpected socket address %T", sa)
}

func syscallClose(fd int) { _ = syscall.Close(fd) }
