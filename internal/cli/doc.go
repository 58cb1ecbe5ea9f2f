// Package cli is what every binary's main shares: exiting with the
// error's text (and quietly on -help), answering a version request, and
// the signals that stop or reload a node.
//
// It must never hold configuration or start anything: the mains stay
// small and say what they run.
package cli
