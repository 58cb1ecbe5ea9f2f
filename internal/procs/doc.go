// Package procs sizes the Go scheduler (GOMAXPROCS) for a process whose
// gnet event loops wait in blocking system calls. It must never change a
// GOMAXPROCS the operator set.
package procs
