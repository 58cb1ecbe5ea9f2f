#!/usr/bin/env bash
# make cluster / make cluster-down: the replicated cluster on this machine,
# without Docker (docs/operations.md, "A cluster on one machine").
#
#   tools/cluster.sh up     build, start `loadtest cluster` in the background
#                           (three Cassandra nodes on 127.0.0.1-3, two engines,
#                           two endpoints behind nginx), print where everything
#                           listens once it all answers
#   tools/cluster.sh down   stop exactly what up started, by PID
#
# CLUSTER_DIR (default loadtest/out/cluster) holds cluster.json (the PIDs),
# cluster.txt, the logs and the binaries; CLUSTER_FLAGS are passed to
# `loadtest cluster` (-cql-nodes, -engines, -endpoints, -cql-consistency).
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${CLUSTER_DIR:-loadtest/out/cluster}
PIDFILE=$DIR/supervisor.pid

# supervisor_alive: the PID in supervisor.pid is our `loadtest cluster`.
supervisor_alive() {
	local pid
	[ -f "$PIDFILE" ] || return 1
	pid=$(cat "$PIDFILE")
	[[ "$pid" =~ ^[0-9]+$ ]] || return 1
	grep -q '^State:.*zombie' "/proc/$pid/status" 2>/dev/null && return 1
	tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "loadtest cluster -dir $DIR "
}

case "${1:-}" in
up)
	if supervisor_alive; then
		echo "a cluster is already up (pid $(cat "$PIDFILE")):"; cat "$DIR/cluster.txt" 2>/dev/null || true
		exit 0
	fi
	mkdir -p "$DIR/bin"
	rm -f "$DIR/cluster.json" "$DIR/cluster.txt"
	# What the cluster needs: nginx (Debian), Java and Maven for Cassandra
	# (tools/cql resolves it from Maven Central).
	command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || bash tools/e2e/firefox/install.sh nginx:nginx
	go build -o "$DIR/bin/" ./loadtest/cmd/loadtest ./engine/cmd/autoconnect ./apitier/cmd/autoendpoint
	# Ended before the cluster is up (SIGTERM, SIGINT, SIGHUP): stop what
	# was started, as a failed start does.
	for sig in HUP INT TERM; do
		# The stop ignores a second signal (timeout(1) signals the child,
		# then its whole group): it is not cut short.
		trap 'trap "" HUP INT TERM; echo "interrupted: stopping what up started" >&2; "$0" down >&2 || true; exit 1' "$sig"
	done
	# Its own session: the cluster outlives this script and the terminal.
	# shellcheck disable=SC2086
	setsid "$DIR/bin/loadtest" cluster -dir "$DIR" -bin-dir "$DIR/bin" ${CLUSTER_FLAGS:-} \
		</dev/null >"$DIR/supervisor.log" 2>&1 &
	echo $! >"$PIDFILE"
	# Ready = cluster.txt written; failed = the supervisor exited.
	for _ in $(seq 1 600); do
		[ -s "$DIR/cluster.txt" ] && { cat "$DIR/cluster.txt"; exit 0; }
		supervisor_alive || break
		sleep 0.5
	done
	echo "FAILED: the cluster did not come up; the end of $DIR/supervisor.log:" >&2
	tail -40 "$DIR/supervisor.log" >&2
	"$0" down >&2 || true
	exit 1
	;;
down)
	if supervisor_alive; then
		pid=$(cat "$PIDFILE")
		echo "stopping the cluster (supervisor pid $pid): engines drain, then endpoints, nginx, Cassandra"
		kill -TERM "$pid"
		for _ in $(seq 1 360); do supervisor_alive || break; sleep 0.5; done
		if supervisor_alive; then
			echo "supervisor $pid still running after 180 s: SIGKILL" >&2
			kill -KILL "$pid"
		fi
	fi
	# Whatever the supervisor could not stop (it was killed, say): its
	# children die with it (they are started with a parent-death signal),
	# the Cassandra nodes run in sessions of their own and are stopped by
	# the PIDs in their directories.
	if [ -f "$DIR/cluster.json" ]; then
		dirs=$(python3 -c 'import json,sys; print(" ".join(json.load(open(sys.argv[1]))["cql_dirs"]))' "$DIR/cluster.json")
		left=""
		for d in $dirs; do [ -d "$d" ] && left="$left $d"; done
		if [ -n "$left" ]; then
			bash tools/cql/cluster-stop.sh "" "${left# }"
		fi
		rm -f "$DIR/cluster.json"
	fi
	rm -f "$PIDFILE" "$DIR/cluster.txt"
	echo "cluster down"
	;;
*)
	echo "usage: $0 up|down" >&2
	exit 2
	;;
esac
