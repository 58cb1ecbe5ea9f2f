#!/usr/bin/env bash
# Stop a node started by tools/cql/start.sh, by its PID, and remove its
# directory (unless KEEP_CQL_DIR=1).
#
#   tools/cql/stop.sh [PID [DIR]]      # default: $CQL_PID and $CQL_DIR
#   tools/cql/stop.sh "" DIR           # PID read from DIR/cassandra.pid
#
# SIGTERM first (Cassandra shuts down cleanly), SIGKILL after
# CQL_STOP_TIMEOUT seconds (default 30). Only a process whose command line
# is Cassandra's daemon (and names DIR, when known) is signalled, so a
# recycled PID is never hit. Exit 0 when no such process is left.
set -euo pipefail

log() { printf 'cql: %s\n' "$*" >&2; }

# An empty PID given ("" DIR) is read from DIR, never taken from an
# exported CQL_PID: that may be another node's (make test exports its own).
PID=${1-${CQL_PID:-}}
DIR=${2:-${CQL_DIR:-}}
TIMEOUT=${CQL_STOP_TIMEOUT:-30}

if [[ -n "$DIR" && -d "$DIR" ]]; then
  DIR=$(cd "$DIR" && pwd)
fi
if [[ -z "$PID" && -n "$DIR" && -f "$DIR/cassandra.pid" ]]; then
  PID=$(cat "$DIR/cassandra.pid")
fi
if [[ -z "$PID" && -z "$DIR" ]]; then
  log "usage: $0 [PID [DIR]]  (or set CQL_PID / CQL_DIR)"
  exit 2
fi

# True while pid $1 (default $PID) is a live (non-zombie) Cassandra daemon
# of ours, running from DIR when DIR is known.
ours() {
  local pid=${1:-$PID} cmd
  [[ "$pid" =~ ^[0-9]+$ && -r "/proc/$pid/cmdline" ]] || return 1
  grep -q '^State:.*zombie' "/proc/$pid/status" 2>/dev/null && return 1
  cmd=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) || return 1
  [[ "$cmd" == *org.apache.cassandra.service.CassandraDaemon* ]] || return 1
  [[ -z "$DIR" || "$cmd" == *"-Dcassandra.storagedir=$DIR "* ]]
}

wait_gone() {  # seconds
  local i n=$(( $1 * 4 ))
  for (( i = 0; i < n; i++ )); do ours || return 0; sleep 0.25; done
  ! ours
}

if [[ -n "$PID" ]]; then
  if [[ ! "$PID" =~ ^[0-9]+$ ]]; then
    log "bad PID: $PID"; exit 2
  fi
  if ours; then
    log "stopping Cassandra pid $PID"
    kill -TERM "$PID" 2>/dev/null || true
    if ! wait_gone "$TIMEOUT"; then
      log "pid $PID still running after ${TIMEOUT}s, sending SIGKILL"
      kill -KILL "$PID" 2>/dev/null || true
      if ! wait_gone 10; then
        log "error: pid $PID did not exit"; exit 1
      fi
    fi
  else
    log "pid $PID is not a running Cassandra node of ours; nothing to kill"
  fi
fi

if [[ -n "$DIR" && -d "$DIR" ]]; then
  if [[ "${KEEP_CQL_DIR:-0}" == 1 ]]; then
    log "keeping $DIR"
  elif [[ -f "$DIR/cassandra.pid" ]] && ours "$(cat "$DIR/cassandra.pid")"; then
    log "error: not removing $DIR: node pid $(cat "$DIR/cassandra.pid") still runs from it"
    exit 1
  elif [[ -f "$DIR/.autopush-cql-node" ]]; then
    rm -rf "$DIR"
  else
    log "not removing $DIR: it was not made by start.sh"
  fi
fi
