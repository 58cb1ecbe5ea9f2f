// Package cqltest gives tests outside storage/scylla a real CQL server:
// the hosts `make test` exports in CQL_HOSTS (a Cassandra node started by
// tools/cql/start.sh), and fresh keyspaces with the schema applied.
//
// It must never be imported by non-test code, nor start a server itself:
// without CQL_HOSTS the tests skip (or fail in CI).
package cqltest
