package engine_test

import (
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/autopush-go/autopush/engine"
	et "github.com/autopush-go/autopush/engine/enginetest"
	"github.com/autopush-go/autopush/internal/listener"
)

// TestListenInUse: a node whose listen or router-listen another process
// holds (a second node on the host, with the same settings) does not
// start; its error names the setting and how to change it, and what it
// had opened is closed again.
func TestListenInUse(t *testing.T) {
	addr := et.HeldAddr(t)
	for _, setting := range []string{"listen", "router-listen"} {
		cfg := et.Config()
		cfg.RouterListen = et.FreeAddr(t)
		if setting == "listen" {
			cfg.Listen = addr
		} else {
			cfg.RouterListen = addr
		}
		srv, err := engine.New(cfg, newStore(t), nil)
		if err != nil {
			t.Fatal(err)
		}
		err = srv.Start()
		var le *listener.ListenError
		if !errors.As(err, &le) || le.Tier != "autoconnect" || le.Setting != setting || le.Addr != addr {
			t.Fatalf("%s held: %#v", setting, err)
		}
		if msg := err.Error(); !strings.HasPrefix(msg, setting+" "+addr+": address already in use") ||
			!strings.Contains(msg, "set "+setting+" to a free address") {
			t.Errorf("%s held: %q", setting, msg)
		}
		if setting == "listen" {
			// The node API had started: its address is free again.
			ln, err := net.Listen("tcp", cfg.RouterListen)
			if err != nil {
				t.Fatalf("the failed node kept router-listen: %v", err)
			}
			ln.Close()
		}
	}
}
