// Package probe reads the load test's processes and machine from outside,
// never from inside them: memory from /proc/<pid>/status, CPU time from
// /proc/<pid>/stat and /proc/stat, a connection node's Go runtime figures
// from its /metrics, and what the machine is (CPU, memory, kernel limits,
// load average).
//
// It only reads: it must never signal, slow or change a process it looks
// at, and a figure it cannot read is -1 (or 0), never a guess.
package probe
