// Package proc runs the project's commands as child processes for the load
// tester and the tests: it starts a command, follows its output line by
// line (MozLog JSON on stdout, anything on stderr), waits for the start
// line whose Fields.msg it is told, keeps the output (in memory or in a log
// file) and its last lines for error messages, and stops the process.
//
// A process started here dies with its parent however the parent ends
// (Pdeathsig on Linux), and is signalled by its PID only (or, when it was
// started as a group leader, by its process group, whose id is that PID).
// This package must never look a process up by name, never signal a process
// it did not start, and never leave one running after Stop or Kill returns.
package proc
