// Command autosender is a sender node: it runs the outbound sender's jobs
// and sending pipeline (sender) over the shared store, for
// operators who scale sending apart from the API (autoendpoint with
// -sender-workers=false takes the pushes). SIGHUP reloads the provider's
// prototype keys; SIGTERM stops gracefully.
package main
