package e2etest

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/autopush-go/autopush/internal/proc"
)

// Start runs cmd as a child process (internal/proc) and waits until it
// logs the MozLog line whose Fields.msg is startMsg. The process is killed
// by its PID when the test ends, and its output is logged if the test
// failed.
func Start(t testing.TB, cmd *exec.Cmd, startMsg string) *proc.Proc {
	t.Helper()
	p, err := proc.Start(context.Background(), cmd, proc.Config{StartMsg: startMsg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("---- %s (pid %d) ----\n%s", filepath.Base(cmd.Path), p.PID(), p.Output())
		}
	})
	return p
}
