// Package settings loads a tier's configuration struct from, in rising
// precedence: the struct's defaults, an optional JSON file, environment
// variables PREFIX__NAME, and command-line flags -name. Both tiers use it,
// so they configure the same way (AUTOCONNECT__PORT=8080, -port 8080).
//
// Fields are exported struct fields (also those of embedded structs) with
// a `conf:"name"` tag and a `help:"..."` tag; supported kinds are string, bool, int, int64, float64,
// time.Duration, and []string and []float64 (comma-separated). A string
// field's `enum:"a|b|c"` tag is the values it takes ("|a|b": or empty).
//
// Load stops on a mistake rather than ignore it: a PREFIX__ variable, a
// file key or a flag that is no setting (naming the nearest), a value
// outside an enum, a positional argument (ErrArgs). Boolean settings are
// boolean flags (-receipts alone is true); -help shows each setting's
// type; -check-config is returned as a Request for the binary to
// validate and exit.
//
// A Group loads several such structs as one set of settings (the
// single-node server runs both tiers): shared names once, the other names
// both have prefixed per struct, the rest as they are.
//
// Flags serves commands configured by their command line alone (the load
// tester): the same struct tags, typed flags, no file and no environment.
//
// It must never import a tier, nor hold a default of its own: defaults
// live in each configuration struct's constructor.
package settings
