package localcluster

import (
	"os"
	"testing"
)

// Gate is the variable tools/test.sh sets for its cluster step, which runs
// the tests that start Cassandra clusters of their own (named TestCluster*)
// one package at a time: beside the other packages' tests, three JVMs
// would starve the machine.
const Gate = "AUTOPUSH_CLUSTER"

// SkipUnlessGated skips tb, saying where it runs (and, when full is set,
// the make target of its full form), unless Gate is 1.
func SkipUnlessGated(tb testing.TB, full string) {
	tb.Helper()
	if os.Getenv(Gate) == "1" {
		return
	}
	msg := "starts a 3-node Cassandra cluster: run by `make test` in its cluster step (" + Gate + "=1)"
	if full != "" {
		msg += "; " + full + " runs it in full"
	}
	tb.Skip(msg)
}
