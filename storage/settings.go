package storage

import "fmt"

// Settings selects and configures a backend. Both tiers embed it in their
// config, so the storage settings (and their AUTOCONNECT__/AUTOEND__
// variables and flags) are defined once; storage/open opens the backend
// they name. Only the binaries and tools that open a store link the
// backends.
type Settings struct {
	// Storage is "embedded" or "scylla". Default "embedded".
	Storage string `conf:"storage" enum:"embedded|scylla" help:"storage backend (embedded: Pebble in data-dir; scylla: ScyllaDB or Cassandra at cql-hosts)"`
	// DataDir holds the embedded store. Default "./data".
	DataDir string `conf:"data-dir" help:"embedded storage directory"`
	// CQLHosts, CQLKeyspace, CQLConsistency configure the scylla backend.
	// Defaults "127.0.0.1:9042", "autopush", "LOCAL_QUORUM".
	CQLHosts       []string `conf:"cql-hosts" help:"ScyllaDB contact points host:port,..."`
	CQLKeyspace    string   `conf:"cql-keyspace" help:"ScyllaDB keyspace"`
	CQLConsistency string   `conf:"cql-consistency" enum:"ONE|TWO|THREE|QUORUM|ALL|LOCAL_QUORUM|LOCAL_ONE" help:"ScyllaDB consistency level of each class below left empty"`
	// CQLRouterWriteConsistency, CQLMessageWriteConsistency and
	// CQLReadConsistency are the levels of the three classes of
	// statement (scylla.Config, docs/storage.md). Default "" (each:
	// CQLConsistency).
	CQLRouterWriteConsistency  string `conf:"cql-consistency-router-write" enum:"|ONE|TWO|THREE|QUORUM|ALL|LOCAL_QUORUM|LOCAL_ONE" help:"consistency of router writes: hello records, node_id clears, channels (empty: cql-consistency)"`
	CQLMessageWriteConsistency string `conf:"cql-consistency-message-write" enum:"|ONE|TWO|THREE|QUORUM|ALL|LOCAL_QUORUM|LOCAL_ONE" help:"consistency of message writes: messages, acks, cursor, broadcasts, sender (empty: cql-consistency)"`
	CQLReadConsistency         string `conf:"cql-consistency-read" enum:"|ONE|TWO|THREE|QUORUM|ALL|LOCAL_QUORUM|LOCAL_ONE" help:"consistency of reads (empty: cql-consistency)"`
}

// DefaultSettings returns the defaults documented on Settings.
func DefaultSettings() Settings {
	return Settings{
		Storage:        "embedded",
		DataDir:        "./data",
		CQLHosts:       []string{"127.0.0.1:9042"},
		CQLKeyspace:    "autopush",
		CQLConsistency: "LOCAL_QUORUM",
	}
}

// Validate reports a backend that does not exist.
func (s *Settings) Validate() error {
	if s.Storage != "embedded" && s.Storage != "scylla" {
		return fmt.Errorf("storage %q is not embedded or scylla", s.Storage)
	}
	return nil
}
