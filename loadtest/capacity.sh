#!/usr/bin/env bash
# make capacity: runs the load tester's standard profile on this machine and
# rewrites docs/capacity.md. The hold scenario needs several engine
# processes sharing storage, so when CQL_HOSTS is not set this starts a
# local Cassandra (tools/cql/start.sh, heap CQL_HEAP, default 2g) and stops
# it by its PID on every exit path, signals included (tools/cql/owned.sh). Arguments go to `loadtest capacity`
# (`make capacity CAPACITY_FLAGS="-scenarios notify"`, say).
set -euo pipefail
cd "$(dirname "$0")/.."

. tools/cql/owned.sh
trap stop_owned_cql EXIT
exit_on_signals

note="${CAPACITY_STORAGE_NOTE:-}"
if [ -z "${CQL_HOSTS:-}" ]; then
	export CQL_HEAP="${CQL_HEAP:-2g}" CQL_HEAP_MIN="${CQL_HEAP_MIN:-1g}"
	echo "== starting a local Cassandra (tools/cql/start.sh, heap $CQL_HEAP)" >&2
	start_owned_cql
	note="Apache Cassandra 5.0.9 started by tools/cql/start.sh, one node, heap $CQL_HEAP"
fi

go build -o loadtest/out/bin/ ./loadtest/cmd/loadtest ./engine/cmd/autoconnect ./apitier/cmd/autoendpoint ./stack/cmd/autopush
loadtest/out/bin/loadtest capacity -bin-dir loadtest/out/bin -storage-note "$note" "$@"
