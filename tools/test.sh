#!/usr/bin/env bash
# Runs the test suite (or the benchmarks) the way CI does: lints, starts a real
# Cassandra node from tools/cql when CQL_HOSTS is not set, runs every package
# with the race detector, then the "server returns" check, which stops that
# node and starts it again, and the "server stopped mid-test" check, which
# kills it. The node is stopped by its PID on every exit path, SIGTERM,
# SIGINT and SIGHUP included (timeout(1) ends a run with SIGTERM): the PID
# its directory names, which follows the node through those restarts
# (tools/cql/owned.sh).
#
#   tools/test.sh               tests
#   tools/test.sh stress        tests with a CPU hog on every core, then the
#                               engine and API tier packages twice more
#   tools/test.sh bench [TIME]  benchmarks (-benchtime TIME, default 1s)
#   tools/test.sh sender-cluster  two, then three sender nodes on one keyspace
#                               sharing one account's rate, 30,000 pushes
#                               each received once (make test: 1,500)
#   tools/test.sh sender-crash  autoendpoint SIGKILLed mid-stream and restarted,
#                               3 rounds of 6,000 pushes per backend and
#                               policy (make test: 1 round of 1,500)
#   tools/test.sh sender-stop   a sender node SIGTERMed with its queue full, 5
#                               rounds of 5,000 per backend, and SIGKILLed for
#                               the takeover (make test: 1 round of 1,500)
#   tools/test.sh burst         bursts of 2,000 pushes at a user agent acking
#                               at 50/s, 10 rounds per backend (make test: 300)
#   tools/test.sh drain-loop    SIGTERM during pushes and acks, 20 rounds on
#                               each backend (make test runs 3)
#   tools/test.sh sender-cluster-faults  two sender nodes on a 3-node
#                               Cassandra cluster of its own, one SIGKILLed
#                               holding leases, a CQL node killed and restarted,
#                               20,000 pushes each sent once (make test's
#                               cluster step: 3,000)
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-test}

. tools/cql/owned.sh
hogs=()
# child is the step running now (fg): a process group of its own (setsid,
# so its PID is the group's), run in the background and waited for. A
# signal to this script alone (a make or a CI runner ending it) then ends
# the step at once: bash runs a trap only once the foreground command it
# waits for has ended, which a test run does after up to 25 minutes.
child=""
fg() {
	setsid "$@" &
	child=$!
	local rc=0
	wait "$child" || rc=$?
	child=""
	return "$rc"
}
# fg_filtered FILTER CMD...: fg CMD, its output through the shell command
# FILTER; the status is CMD's.
fg_filtered() {
	# shellcheck disable=SC2016 # expanded by the inner shell
	fg bash -c 'filter=$1; shift; "$@" 2>&1 | eval "$filter"; exit "${PIPESTATUS[0]}"' _ "$@"
}
cleanup() {
	# The step, the hogs and the node are this script's: stopped by PID
	# (the step by its group's), never by name. A second signal must not
	# cut this short (timeout(1) signals the child, then its whole group).
	trap '' HUP INT TERM
	if [ -n "$child" ]; then
		kill -TERM -- "-$child" 2>/dev/null || true
		wait "$child" 2>/dev/null || true
	fi
	if [ ${#hogs[@]} -gt 0 ]; then
		kill "${hogs[@]}" 2>/dev/null || true
	fi
	stop_owned_cql
}
trap cleanup EXIT
exit_on_signals

if [ "$mode" = stress ]; then
	# A busy loop per core: every test then runs on a machine with no idle
	# CPU, as CI's shared machines often are. A test that depends on timing
	# it does not control fails here first.
	for _ in $(seq "$(nproc)"); do
		bash -c 'while :; do :; done' &
		hogs+=($!)
	done
	echo "== stress: ${#hogs[@]} CPU hogs running (pids ${hogs[*]})" >&2
fi

if [ "$mode" = sender-cluster-faults ]; then
	# Starts its own cluster (tools/cql/localcluster): no single node here.
	fg_filtered "grep -v ' WARN '" \
		env AUTOPUSH_CLUSTER=1 SENDER_CLUSTER_FAULT_PUSHES=${SENDER_CLUSTER_FAULT_PUSHES:-20000} go test -count=1 -v -timeout 40m -run '^TestClusterSenderFaults$' ./apitier/cmd/autoendpoint/
	exit
fi

if [ -z "${CQL_HOSTS:-}" ]; then
	echo "== starting a local Cassandra (tools/cql/start.sh)" >&2
	start_owned_cql
fi

if [ "$mode" = bench ]; then
	fg go test -run '^$' -bench . -benchmem -benchtime "${2:-1s}" ./storage/...
	exit 0
fi
if [ "$mode" = sender-cluster ]; then
	fg_filtered "grep -v ' WARN '" \
		env SENDER_CLUSTER_PUSHES=${SENDER_CLUSTER_PUSHES:-30000} go test -count=1 -v -timeout 40m -run '^TestNodesShareTheRate$' ./sender/
	exit
fi
if [ "$mode" = sender-crash ]; then
	fg_filtered "grep -v ' WARN '" \
		env SENDER_CRASH_ROUNDS=${SENDER_CRASH_ROUNDS:-3} SENDER_CRASH_PUSHES=${SENDER_CRASH_PUSHES:-6000} go test -count=1 -v -timeout 60m -run '^TestCrashMidStream$' ./apitier/cmd/autoendpoint/
	exit
fi

if [ "$mode" = sender-stop ]; then
	fg_filtered "grep -v ' WARN '" \
		env SENDER_STOP_ROUNDS=${SENDER_STOP_ROUNDS:-5} SENDER_STOP_PUSHES=${SENDER_STOP_PUSHES:-5000} go test -count=1 -v -timeout 60m -run '^(TestStopHandsBack|TestKillTakeover)$' ./apitier/cmd/autoendpoint/
	exit
fi

if [ "$mode" = burst ]; then
	fg_filtered "grep -a -E '^\s*(--- |msglimit_test\.go|ok |FAIL|PASS$)'" \
		env AUTOPUSH_BURST_PUSHES=${AUTOPUSH_BURST_PUSHES:-2000} AUTOPUSH_BURST_ROUNDS=${AUTOPUSH_BURST_ROUNDS:-10} go test -count=1 -v -timeout 60m -run '^TestE2EMsgLimitSparesAConnectedClient$' ./stack/
	exit
fi

if [ "$mode" = drain-loop ]; then
	fg_filtered "grep -a -E '^\s*(--- |drain_test\.go|ok |FAIL|PASS$)'" \
		env AUTOPUSH_DRAIN_ROUNDS=${AUTOPUSH_DRAIN_ROUNDS:-20} go test -count=1 -v -timeout 30m -run '^TestDrainLoop$' ./stack/cmd/autopush/
	exit
fi

# run NAME CMD...: runs a go test command with -v into a log, prints one
# line per test and package (so the output shows what passed where), and
# the whole log when it fails.
run() {
	local name=$1 log
	shift
	log=$(mktemp)
	echo "== $name" >&2
	if fg "$@" >"$log" 2>&1; then
		grep -E '^(\s*--- (PASS|FAIL|SKIP)|ok |FAIL|PASS$)' "$log" | grep -v -- '--- PASS: Fuzz.*/seed#' || true
		rm -f "$log"
		return 0
	fi
	cat "$log"
	# CI shows only the head and the end of the output: repeat the test
	# files' own messages, then what failed last, so that the names of
	# the failed tests are never in the part it leaves out.
	echo "== messages of the test files in $name (the last 40):"
	grep -E -- '_test\.go:[0-9]+: ' "$log" | grep -v 'enginetest.go' | tail -40 || true
	echo "== failures in $name:"
	grep -E -- '--- FAIL|^FAIL|^panic:|WARNING: DATA RACE|test timed out' "$log" | tail -40 || true
	echo "FAILED: $name (log: $log)" >&2
	return 1
}

# The interop tests send with the real npm web-push package. Without npm
# they fail in CI and skip elsewhere, saying how to install it.
if [ ! -d tools/webpush-node/node_modules ] && { command -v npm >/dev/null || [ "${CI:-}" = true ]; }; then
	echo "== installing the npm web-push package (tools/webpush-node)" >&2
	make --no-print-directory node-deps
fi

# pywebpush, pinned, in a venv: the README's library examples run it
# (TestReadmeLibraries). Without it that test fails in CI.
echo "== installing pywebpush (make pywebpush)" >&2
if ! make --no-print-directory pywebpush && [ "${CI:-}" = true ]; then
	echo "FAILED: could not install pywebpush (python3 and python3-venv are needed)" >&2
	exit 1
fi

# The schema-driven fuzzer (docs/schemathesis_test.go): schemathesis from
# PyPI, pinned, in a venv. Without it the test fails in CI and skips
# elsewhere, saying how to install it.
echo "== installing schemathesis (make py-deps)" >&2
if st=$(make --no-print-directory py-deps); then
	export "${st?}"
elif [ "${CI:-}" = true ]; then
	echo "FAILED: could not install schemathesis (python3 and python3-venv are needed)" >&2
	exit 1
fi

# Debian's nginx: the cluster tests put it in front of several endpoints
# (TestClusterFaults), make e2e's TLS run behind it. Installed here, before
# any test, when missing and this shell may (root): the cluster run once
# reached TestClusterFaults before a later package's tools/cluster.sh had
# installed it.
bash tools/e2e/firefox/install.sh nginx:nginx

# promtool (Debian's prometheus package, its service kept from starting):
# ops/alerts_test.go checks and unit-tests the alert rules with it.
bash tools/promtool-install.sh

echo "== lint (go vet, staticcheck)" >&2
fg make --no-print-directory lint
run "go test -race (CQL_HOSTS=$CQL_HOSTS)" go test -race -count=1 -v -timeout 25m ./...
if [ "$mode" = stress ]; then
	run "go test -race -count=2 engine, API tier and stack (with the CPU hogs)" \
		go test -race -count=2 -v -timeout 25m ./engine/... ./apitier/... ./stack/...
fi
# The tests that start Cassandra clusters of their own (named TestCluster*,
# skipped in the run above): one package at a time, beside nothing else.
run "cluster tests (each starts its own 3-node Cassandra; AUTOPUSH_CLUSTER=1)" \
	env AUTOPUSH_CLUSTER=1 go test -count=1 -p 1 -v -timeout 30m -run '^TestCluster' ./...
if [ -n "$owned_cql_dir" ]; then
	run "the store serves again when its CQL server returns (stops pid $CQL_PID, restarts it)" \
		env CQL_RECOVER_DIR="$CQL_DIR" go test -count=1 -v -timeout 10m -run '^TestStoreRecovers$' ./storage/scylla/
	CQL_PID=$(cat "$CQL_DIR/cassandra.pid") # the node as restarted
	run "storage unavailable when the CQL server stops (kills pid $CQL_PID)" \
		env CQL_STOP_PID="$CQL_PID" go test -count=1 -v -run '^TestServerStopped$' ./storage/scylla/
fi

# The release: make dist's .deb installed with dpkg, run as its systemd
# unit says, smoke-tested and purged; the .rpm read (ops/dist_test.go).
# Without root or dpkg it fails under CI=true and skips elsewhere.
run "make dist-test (the .deb installed, run as its unit, smoke-tested, purged)" \
	make --no-print-directory dist-test

# docker-compose.yml for real under podman (Cassandra in ScyllaDB's place;
# docker/podman/stack.sh installs podman, podman-compose and mmdebstrap
# when missing and root; the test fails in CI and skips elsewhere when it
# cannot). ~1 min with its base images cached, 3.5 to 6 cold.
run "the compose stack under podman (AUTOPUSH_PODMAN=1)" \
	env AUTOPUSH_PODMAN=1 go test -count=1 -v -timeout 20m -run '^TestComposeUnderPodman$' ./ops/

# A real Firefox end to end; make e2e installs firefox-esr when missing.
echo "== make e2e (headless Firefox through the single-node server)" >&2
fg make --no-print-directory e2e
