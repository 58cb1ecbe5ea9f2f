#!/usr/bin/env bash
# Started by tools/cql/start.sh when CQL_OWNER_PID is set, in a session of
# its own (a signal to the owner's process group does not reach it): once
# the owner, the process the node was started for, has ended while the
# node still runs, whatever ended it (SIGTERM, SIGKILL), it stops the node
# by its PID (tools/cql/stop.sh, which removes the node's directory unless
# KEEP_CQL_DIR=1). When the node ends first (stopped, or killed by a test
# that restarts it later), it exits and does nothing.
#
#   owner-watch.sh OWNER_PID OWNER_START NODE_PID NODE_START DIR
#
# The start times (clock ticks after boot, /proc/PID/stat) tell a PID
# reused by another process from the one watched.
set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
owner=$1 owner_start=$2 node=$3 node_start=$4 dir=$5

while :; do
  [[ "$(bash "$HERE/started.sh" "$node")" == "$node_start" ]] || exit 0
  [[ "$(bash "$HERE/started.sh" "$owner")" == "$owner_start" ]] || break
  sleep 1
done
echo "owner pid $owner ended; stopping node pid $node" >&2
exec bash "$HERE/stop.sh" "$node" "$dir"
