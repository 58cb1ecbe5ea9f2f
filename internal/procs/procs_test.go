package procs

import (
	"os"
	"runtime"
	"testing"
)

func TestForLoops(t *testing.T) {
	before := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(before) })

	t.Setenv("GOMAXPROCS", "") // restored after the test
	os.Unsetenv("GOMAXPROCS")
	if cores := ForLoops(3); cores != before {
		t.Errorf("cores %d, want GOMAXPROCS before, %d", cores, before)
	}
	if got := runtime.GOMAXPROCS(0); got != before+4 {
		t.Errorf("3 loops: GOMAXPROCS %d, want %d (cores + loops + the acceptor's)", got, before+4)
	}
	runtime.GOMAXPROCS(before)
	ForLoops(0)
	if got := runtime.GOMAXPROCS(0); got != before+runtime.NumCPU()+1 {
		t.Errorf("gnet's default loops: GOMAXPROCS %d, want %d", got, before+runtime.NumCPU()+1)
	}

	runtime.GOMAXPROCS(before)
	t.Setenv("GOMAXPROCS", "1")
	if cores := ForLoops(3); cores != before || runtime.GOMAXPROCS(0) != before {
		t.Errorf("with GOMAXPROCS set: cores %d, GOMAXPROCS %d; want both %d, unchanged", cores, runtime.GOMAXPROCS(0), before)
	}
}
