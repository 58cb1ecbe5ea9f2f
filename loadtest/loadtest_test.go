package loadtest

import (
	"slices"
	"strings"
	"testing"
)

// TestProfileCommands: the capacity profile's runs are recorded as the
// commands that repeat them (docs/capacity.md, docs/benchmarks.md).
func TestProfileCommands(t *testing.T) {
	var got []string
	for _, c := range DefaultProfile().configs() {
		got = append(got, strings.TrimPrefix(c.Command, "go run ./loadtest/cmd/loadtest "))
	}
	want := []string{
		"hold -uas 200000 -connect-rate 1500 -steps 5 -settle 15s -hold 1m0s",
		"notify -uas 10000 -rates 100,250,500,750,1000,2000,4000 -stage-time 20s -warmup 5s",
		"stored -engines 2 -push-rate 800",
		"churn -engines 2 -uas 5000 -push-rate 600 -duration 2m50s -session 20s -offline 5s",
	}
	if !slices.Equal(got, want) {
		t.Errorf("commands\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
