// Package outage holds TestClusterStorageOutage: the service's binaries
// (two autoconnect, two autoendpoint) on a real three-node Cassandra
// cluster (tools/cql/localcluster), user agents on real websockets and
// pushes at a steady pace, while every CQL node is stopped for 30 s and
// started again. It checks what docs/operations.md promises of a storage
// outage and logs the recovery times docs/capacity.md quotes. Test code
// only: nothing imports this package.
package outage
