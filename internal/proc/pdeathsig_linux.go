package proc

import "syscall"

// dieWithParent makes the kernel kill the child when the thread that
// started it (this process, in practice) ends, however it ends.
func dieWithParent(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
