# shellcheck shell=bash
# Sourced (from the repository's root) by the scripts that start a
# Cassandra node for their own run and must stop it on every exit path:
# tools/test.sh, loadtest/capacity.sh, loadtest/pushpath.sh.
#
#   . tools/cql/owned.sh
#   trap 'stop_owned_cql' EXIT; exit_on_signals
#   start_owned_cql            # exports CQL_HOSTS, CQL_PID, CQL_DIR
#
# The node's directory is made before it starts: its cassandra.pid names
# the node's process from its launch on, and again after a restart
# (TestStoreRecovers), so stop_owned_cql stops whatever node there is,
# by that PID (tools/cql/stop.sh "" DIR), at any moment. The node is also
# the script's (CQL_OWNER_PID): should the script be SIGKILLed, which no
# trap sees, tools/cql/owner-watch.sh stops it.

owned_cql_dir=""

# start_owned_cql starts the node (tools/cql/start.sh; CQL_HEAP and the
# other settings from the environment), or exits the script.
start_owned_cql() {
	local out
	owned_cql_dir=$(mktemp -d "${TMPDIR:-/tmp}/cql.XXXXXX")
	# Not eval "$(...)" directly: that would hide a failed start.
	# Exported: a test that restarts the node (TestStoreRecovers) starts
	# it for this script too.
	export CQL_OWNER_PID=$$
	out=$(CQL_DIR=$owned_cql_dir bash tools/cql/start.sh) || { echo "FAILED: could not start Cassandra" >&2; exit 1; }
	eval "$out"
	export CQL_HOSTS CQL_PID CQL_DIR
}

# stop_owned_cql stops the node start_owned_cql started, if any, and
# removes its directory.
stop_owned_cql() {
	[ -n "$owned_cql_dir" ] || return 0
	# Run as an EXIT trap: a second signal (timeout(1) signals the child,
	# then its whole group) must not cut the stop short.
	trap '' HUP INT TERM
	bash tools/cql/stop.sh "" "$owned_cql_dir" >&2 || true
	rmdir "$owned_cql_dir" 2>/dev/null || true # left empty by a start that failed early
}

# exit_on_signals makes HUP, INT and TERM exit the script (129, 130,
# 143), so that its EXIT trap runs whatever the shell's default for them.
exit_on_signals() {
	trap 'exit 129' HUP
	trap 'exit 130' INT
	trap 'exit 143' TERM
}
