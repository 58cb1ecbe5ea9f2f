// Command cqlschema applies storage/scylla/schema.cql (keyspace, router and
// message tables) to a ScyllaDB or Cassandra cluster. It is idempotent: run
// it before the first start of the service and after upgrades. The service
// itself never creates tables.
//
// It must never drop or alter data.
package main
