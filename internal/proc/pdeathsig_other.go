//go:build !linux

package proc

import "syscall"

// dieWithParent: only Linux has Pdeathsig; elsewhere Stop and Kill are all
// there is.
func dieWithParent(*syscall.SysProcAttr) {}
