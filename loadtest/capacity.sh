#!/usr/bin/env bash
# make capacity: runs the load tester's standard profile on this machine and
# rewrites docs/capacity.md. The hold scenario needs several engine
# processes sharing storage, so when CQL_HOSTS is not set this starts a
# local Cassandra (tools/cql/start.sh, heap CQL_HEAP, default 2g) and stops
# it by its PID on every exit path. Arguments go to `loadtest capacity`
# (`make capacity CAPACITY_FLAGS="-scenarios notify"`, say).
set -euo pipefail
cd "$(dirname "$0")/.."

started=""
cleanup() {
	if [ -n "$started" ]; then
		bash tools/cql/stop.sh "$CQL_PID" "$CQL_DIR" >&2 || true
	fi
}
trap cleanup EXIT

note="${CAPACITY_STORAGE_NOTE:-}"
if [ -z "${CQL_HOSTS:-}" ]; then
	export CQL_HEAP="${CQL_HEAP:-2g}" CQL_HEAP_MIN="${CQL_HEAP_MIN:-1g}"
	echo "== starting a local Cassandra (tools/cql/start.sh, heap $CQL_HEAP)" >&2
	out=$(bash tools/cql/start.sh) || { echo "FAILED: could not start Cassandra" >&2; exit 1; }
	eval "$out"
	export CQL_HOSTS CQL_PID CQL_DIR
	started=1
	note="Apache Cassandra 5.0.9 started by tools/cql/start.sh, one node, heap $CQL_HEAP"
fi

go build -o loadtest/out/bin/ ./loadtest/cmd/loadtest ./engine/cmd/autoconnect ./apitier/cmd/autoendpoint ./stack/cmd/autopush
loadtest/out/bin/loadtest capacity -bin-dir loadtest/out/bin -storage-note "$note" "$@"
