package scylla

import (
	"testing"

	"github.com/autopush-go/autopush/storage"
	"github.com/autopush-go/autopush/storage/storagetest"
)

// TestConformance runs the shared storage suite, each test on a fresh
// keyspace that is dropped afterwards.
func TestConformance(t *testing.T) {
	cqlHosts(t) // fail or skip with the install hint once, not per test
	storagetest.Run(t, storagetest.Harness{
		New: func(tb testing.TB) storage.Store { return newTestStore(tb) },
	})
}
