package scylla

import (
	"slices"
	"strings"
	"testing"

	"github.com/gocql/gocql"

	"github.com/autopush-go/autopush/internal/settings"
	"github.com/autopush-go/autopush/storage"
)

// TestSettingsLevelsAreParseLevels: the consistency levels the settings
// accept (their enum) are those parseLevel accepts, so a level refused
// at load would be refused at start too and none accepted at load fails
// at start.
func TestSettingsLevelsAreParseLevels(t *testing.T) {
	var accepted []string
	for _, cl := range []gocql.Consistency{gocql.Any, gocql.One, gocql.Two, gocql.Three, gocql.Quorum, gocql.All,
		gocql.LocalQuorum, gocql.EachQuorum, gocql.LocalOne, gocql.Serial, gocql.LocalSerial} {
		if _, err := parseLevel("test", cl.String()); err == nil {
			accepted = append(accepted, cl.String())
		}
	}
	levels := 0
	for _, s := range settings.Describe(&storage.Settings{}, "") {
		if !strings.HasPrefix(s.Name, "cql-consistency") {
			continue
		}
		levels++
		enum := slices.DeleteFunc(slices.Clone(s.Enum), func(v string) bool { return v == "" })
		slices.Sort(enum)
		slices.Sort(accepted)
		if !slices.Equal(enum, accepted) {
			t.Errorf("%s takes %v, parseLevel accepts %v", s.Name, enum, accepted)
		}
	}
	if levels != 4 {
		t.Errorf("%d cql-consistency settings, want 4", levels)
	}
}
