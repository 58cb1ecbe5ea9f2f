// Package cron reads Quartz cron expressions (the dialect pushes' send
// windows are written in) and finds their next fire time in a time zone.
//
// Its own code, not a library's: go-quartz v0.15.2 recursed without end
// on a day that never comes ("0 0 0 ? 2 MON#5 2027": a stack overflow
// that killed the process) and got rolled-over days wrong, and
// hashicorp/cronexpr v1.1.3 panics on a backwards range, numbers
// weekdays from 0 and lacks L-n. Here every search is bounded by
// construction: Next walks at most Horizon years a day at a time,
// skipping the months and years an expression leaves out, so no input
// can hang, recurse or grow memory.
//
// It must never do I/O; Schedule is immutable and safe for concurrent use.
package cron
