#!/usr/bin/env bash
# Start a real Cassandra cluster on this machine: N nodes (default 3) on
# 127.0.0.1 ... 127.0.0.N, one process each (tools/cql/start.sh), sharing a
# gossip port and a CQL port on their own addresses, every node a seed (so
# any of them, or all, can restart alone) and each given its token (so they
# start together, none bootstrapping). On success prints shell-eval-able
# lines to stdout:
#
#   CQL_HOSTS=127.0.0.1:PORT,127.0.0.2:PORT,127.0.0.3:PORT
#   CQL_PIDS="pid1 pid2 pid3"
#   CQL_DIRS="/tmp/cqlc.X/node1 /tmp/cqlc.X/node2 /tmp/cqlc.X/node3"
#
# and exits non-zero, with no node left running, when any node fails, or
# when it is ended by SIGTERM, SIGINT or SIGHUP before it printed them (its
# starts are stopped, by the PIDs their directories name).
#
#   out=$(tools/cql/cluster.sh) || exit 1; eval "$out"
#   tools/cql/stop.sh "$pid" "$dir"       # one node, by PID; or all:
#   for i in 1 2 3; do ...; done          # (tools/cql/cluster-stop.sh)
#
# A stopped node starts again, same address, ports and data, with
#   CQL_RESTART=1 CQL_DIR=<its dir> tools/cql/start.sh
#
# Environment: CQL_NODES (default 3), CQL_CLUSTER_DIR (default mktemp -d),
# and start.sh's CQL_HEAP (default here 768m: three nodes beside the
# service and its load), CQL_HEAP_MIN, CQL_START_TIMEOUT, CQL_JVM_OPTS.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
log() { printf 'cql-cluster: %s\n' "$*" >&2; }

N=${CQL_NODES:-3}
[[ "$N" =~ ^[1-9]$ ]] || { log "CQL_NODES=$N is not 1..9"; exit 2; }
export CQL_HEAP=${CQL_HEAP:-768m}
export CQL_CLUSTER_NAME=${CQL_CLUSTER_NAME:-autopush-cluster}

# One pair of ports free on every node's address (a node binds its own).
read -r SP NP < <(python3 - "$N" <<'EOF'
import socket, sys
n = int(sys.argv[1])
for _ in range(100):
    held = []
    try:
        a = socket.socket(); a.bind(("127.0.0.1", 0)); held.append(a)
        b = socket.socket(); b.bind(("127.0.0.1", 0)); held.append(b)
        ports = (a.getsockname()[1], b.getsockname()[1])
        for i in range(2, n + 1):
            for p in ports:
                s = socket.socket(); s.bind(("127.0.0.%d" % i, p)); held.append(s)
        print(*ports)
        break
    except OSError:
        pass
    finally:
        for s in held:
            s.close()
else:
    sys.exit("no port pair free on every address")
EOF
)

if [[ -n "${CQL_CLUSTER_DIR:-}" ]]; then
  TOP=$CQL_CLUSTER_DIR; mkdir -p "$TOP"
else
  TOP=$(mktemp -d "${TMPDIR:-/tmp}/cqlc.XXXXXX")
fi
seeds=()
for i in $(seq 1 "$N"); do seeds+=("127.0.0.$i:$SP"); done
SEEDS=$(IFS=,; echo "${seeds[*]}")

# Evenly spaced Murmur3 tokens: each node owns 1/N of the ring (with
# replication factor N every node holds every row anyway).
mapfile -t TOKENS < <(python3 -c "
n=$N
for i in range(n): print(-2**63 + i * (2**64 // n))")

pids=() dirs=() outs=()
ok=0
# cleanup, unless the cluster is up: each start still running is ended
# (start.sh stops its node on SIGTERM), then every node is stopped by the
# PID its directory names, and the directory removed.
cleanup() {
  [[ $ok == 1 ]] && return
  # A second signal must not cut the cleanup short: timeout(1) sends its
  # signal to the child and then to the whole process group again.
  trap '' HUP INT TERM
  local p d
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  for d in "${dirs[@]}"; do bash "$HERE/stop.sh" "" "$d" || true; done
  rm -rf "$TOP"
}
trap cleanup EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM
fail=0
for i in $(seq 1 "$N"); do
  dir=$TOP/node$i
  mkdir -p "$dir"
  dirs+=("$dir")
  out=$TOP/node$i.start
  outs+=("$out")
  CQL_DIR=$dir CQL_LISTEN=127.0.0.$i CQL_STORAGE_PORT=$SP CQL_NATIVE_PORT=$NP CQL_SEEDS=$SEEDS \
    CQL_INITIAL_TOKEN=${TOKENS[$((i - 1))]} bash "$HERE/start.sh" >"$out" &
  pids+=($!)
done
for i in "${!pids[@]}"; do
  wait "${pids[$i]}" || fail=1
done
nodepids=()
for i in "${!outs[@]}"; do
  p=$(sed -n 's/^CQL_PID=//p' "${outs[$i]}")
  nodepids+=("$p")
  rm -f "${outs[$i]}"
done
pids=() # all exited
if [[ $fail == 1 ]]; then
  log "a node failed to start; stopping the others"
  exit 1
fi
# Ready = every node answers CQL (start.sh) and lists every other node,
# with its token, in system.peers_v2: before that, a node coordinating a
# write would place it on the nodes it knows only (and refuse QUORUM).
peers_with_tokens() {  # host port -> how many peers have tokens
  python3 "$HERE/probe.py" peers "$1" "$2"
}
deadline=$(( $(date +%s) + ${CQL_START_TIMEOUT:-180} ))
for i in $(seq 1 "$N"); do
  until [[ "$(peers_with_tokens "127.0.0.$i" "$NP" 2>/dev/null)" == "$((N - 1))" ]]; do
    if (( $(date +%s) >= deadline )); then
      log "node $i does not list the other $((N - 1)) nodes with tokens in time; stopping the cluster"
      exit 1
    fi
    sleep 0.2
  done
done
hosts=()
for i in $(seq 1 "$N"); do hosts+=("127.0.0.$i:$NP"); done
log "$N nodes ready: ${hosts[*]}"
ok=1
printf 'CQL_HOSTS=%s\n' "$(IFS=,; echo "${hosts[*]}")"
printf 'CQL_PIDS="%s"\n' "${nodepids[*]}"
printf 'CQL_DIRS="%s"\n' "${dirs[*]}"
