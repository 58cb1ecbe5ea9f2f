// Package hist holds the load tester's latency histograms: HDR histograms
// of microseconds (1 µs to 10 minutes, three significant digits), recorded
// in the worker processes against the worker's Clock, sent to the
// coordinator in their compressed encoding, merged there and summarised
// into percentiles.
//
// A latency counts from a push's scheduled send time, never from when the
// application server got round to it, so a slow server cannot hide its queueing. This
// package must never read the wall clock into a latency.
package hist
