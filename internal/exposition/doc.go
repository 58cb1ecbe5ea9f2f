// Package exposition writes a node's GET /metrics page in the Prometheus
// text format as a scraper reads it: each family's samples together, under
// one # HELP line and one # TYPE line.
//
// The TYPE is the one the code registered (the VictoriaMetrics library
// writes it once its metadata is exposed, ExposeMetadata); the HELP is the
// family's description in docs/metrics.md, embedded in the binary, so a
// metric is described in one place. A family metrics.md does not describe
// is served with HELP "undocumented" (the tests in docs/ fail on it).
//
// It must not change a sample: it only moves lines and writes comments.
package exposition
