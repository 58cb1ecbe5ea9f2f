#!/usr/bin/env bash
# Stop every node of a cluster started by tools/cql/cluster.sh, by PID
# (tools/cql/stop.sh each, in parallel), and remove their directories
# (unless KEEP_CQL_DIR=1).
#
#   tools/cql/cluster-stop.sh ["PIDS" "DIRS"]   # default: $CQL_PIDS, $CQL_DIRS
#
# A node already stopped is skipped; a node restarted since (CQL_RESTART=1)
# has a new PID, which stop.sh then reads from its directory when the PID
# given is "" (pass the directories alone: cluster-stop.sh "" "DIRS").
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
read -r -a pids <<<"${1-${CQL_PIDS:-}}"
read -r -a dirs <<<"${2-${CQL_DIRS:-}}"
(( ${#dirs[@]} > 0 )) || { echo "usage: $0 [\"PIDS\" \"DIRS\"] (or set CQL_PIDS / CQL_DIRS)" >&2; exit 2; }
rc=0
jobs=()
for i in "${!dirs[@]}"; do
  bash "$HERE/stop.sh" "${pids[$i]:-}" "${dirs[$i]}" &
  jobs+=($!)
done
for j in "${jobs[@]}"; do wait "$j" || rc=1; done
# The nodes' common parent, made by cluster.sh, once empty.
top=$(dirname "${dirs[0]}")
[[ "${KEEP_CQL_DIR:-0}" == 1 ]] || rmdir "$top" 2>/dev/null || true
exit $rc
