// Package e2etest holds what the end-to-end harnesses share: pushing with
// the npm web-push library as an application server does, building the
// module's commands, and a testing.TB wrapper around internal/proc for
// running them as processes that log MozLog JSON. It is imported by tests
// only and must never be imported by the service's own packages.
package e2etest
