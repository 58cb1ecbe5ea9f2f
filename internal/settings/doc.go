// Package settings loads a tier's configuration struct from, in rising
// precedence: the struct's defaults, an optional JSON file, environment
// variables PREFIX__NAME, and command-line flags -name. Both tiers use it,
// so they configure the same way (AUTOCONNECT__PORT=8080, -port 8080).
//
// Fields are exported struct fields (also those of embedded structs) with
// a `conf:"name"` tag and a `help:"..."` tag; supported kinds are string, bool, int, int64, float64,
// time.Duration, and []string and []float64 (comma-separated).
//
// Flags serves commands configured by their command line alone (the load
// tester): the same struct tags, typed flags, no file and no environment.
//
// It must never import a tier, nor hold a default of its own: defaults
// live in each configuration struct's constructor.
package settings
