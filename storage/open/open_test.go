package open

import (
	"errors"
	"testing"

	"github.com/autopush-go/autopush/storage"
)

// TestConsistencySettings: each of the three per-class settings reaches
// the scylla backend, which refuses a level not valid for its class
// before it dials anything (the hosts name a closed loopback port).
func TestConsistencySettings(t *testing.T) {
	for name, set := range map[string]func(*storage.Settings){
		"cql-consistency":               func(s *storage.Settings) { s.CQLConsistency = "ANY" },
		"cql-consistency-router-write":  func(s *storage.Settings) { s.CQLRouterWriteConsistency = "ANY" },
		"cql-consistency-message-write": func(s *storage.Settings) { s.CQLMessageWriteConsistency = "SERIAL" },
		"cql-consistency-read":          func(s *storage.Settings) { s.CQLReadConsistency = "EACH_QUORUM" },
	} {
		t.Run(name, func(t *testing.T) {
			s := storage.DefaultSettings()
			s.Storage, s.CQLHosts = "scylla", []string{"127.0.0.1:1"}
			set(&s)
			st, err := Store(t.Context(), s, nil)
			if err == nil {
				st.Close()
			}
			if !errors.Is(err, storage.ErrInvalid) {
				t.Fatalf("%s at an invalid level: %v, want ErrInvalid", name, err)
			}
		})
	}
}
