package listener

import (
	"errors"
	"net"
	"strings"
	"syscall"
	"testing"
)

// TestListenError: an address in use fails with an error naming the
// setting, its address and how to change it (and how to turn the
// listener off, when it can be); other failures keep their cause.
func TestListenError(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	addr := held.Addr().String()
	_, err = Listen("autoconnect", "router-listen", addr)
	var le *ListenError
	if !errors.As(err, &le) || le.Tier != "autoconnect" || !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatalf("%#v", err)
	}
	want := "router-listen " + addr + ": address already in use by another process (a second node on this host needs addresses of its own); " +
		"set router-listen to a free address (port 0: any free port, logged at start)"
	if err.Error() != want {
		t.Errorf("%q\nwant %q", err, want)
	}
	le.Setting, le.Off = "metrics-listen", `""`
	if !strings.HasSuffix(err.Error(), `set metrics-listen to a free address (port 0: any free port, logged at start), or to "" to turn it off`) {
		t.Errorf("renamed, with Off: %q", err)
	}
	if _, err := Listen("autoconnect", "listen", "127.0.0.1:notaport"); err == nil || !strings.HasPrefix(err.Error(), "listen 127.0.0.1:notaport: ") ||
		strings.Contains(err.Error(), "in use") {
		t.Errorf("a bad address: %v", err)
	}
}
