// Package loadtest drives many virtual user agents and application-server
// senders against a running service to measure capacity and latency.
package loadtest
