package scylla

import (
	"testing"

	"github.com/autopush-go/autopush/storage"
	"github.com/autopush-go/autopush/storage/storagetest"
)

// BenchmarkStore runs the shared storage benchmarks against the CQL_HOSTS
// node, each on a fresh keyspace.
func BenchmarkStore(b *testing.B) {
	cqlHosts(b)
	storagetest.Bench(b, storagetest.Harness{New: func(tb testing.TB) storage.Store { return newTestStore(tb) }})
}
