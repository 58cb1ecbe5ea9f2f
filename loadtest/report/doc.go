// Package report is what a load-test run leaves behind: the Report of one
// scenario (JSON, an HTML page of inline SVG charts, the text summary with
// its grep-able RESULT line) and docs/capacity.md, rendered from the
// capacity profile's reports. It also fits the hold scenario's memory
// slopes (least squares).
//
// It formats and fits figures others measured; it must never measure, run
// or judge anything itself (the coordinator sets Pass and Problems), and
// its JSON field names are a format readers rely on: add, never rename.
package report
