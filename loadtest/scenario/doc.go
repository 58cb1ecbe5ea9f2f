// Package scenario says what a load-test run is: the scenarios (hold,
// notify, stored, churn, broadcast), what each measures (its -help), and Config, the
// settings of one run with their defaults, command-line flags and
// validation.
//
// It describes runs; it must never start a process or open a socket (the
// coordinator in package loadtest runs them).
package scenario
