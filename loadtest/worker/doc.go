// Package worker is a load-test worker process: the load tester's binary
// re-executed with Env set, holding a share of the user agents (package
// agent) and an application server (package appserver) that pushes to them,
// with one ledger that sees both ends. The coordinator drives it with JSON
// lines on stdin (Command) and reads Events on stdout; stderr is its log.
//
// A worker runs one command at a time and reports its counters every
// SampleEvery. It must never start other processes, and never talk to
// anything but the engines and the endpoint in its Setup.
package worker
