// Package promtext reads the Prometheus text exposition format the nodes
// serve on /metrics: for the load tester's samplers and for the tests that
// check what a node reports.
//
// It parses sample lines only (comments and blank lines are skipped), as
// "name{labels} value" with an optional timestamp after the value. It
// must never be needed to serve metrics: the nodes write them with
// VictoriaMetrics/metrics.
package promtext
