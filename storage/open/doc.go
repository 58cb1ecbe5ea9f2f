// Package open opens the backend that storage.Settings name, so the
// binaries and tools choose and configure a backend the same way. It links
// every backend: only mains and the tools and tests that open a store
// import it, never a tier library.
package open
