#!/usr/bin/env bash
# make pushpath: the push path and the hello at this machine's limit
# (docs/benchmarks.md), each measure PUSHPATH_REPEATS times (default 3),
# medians printed, the load generator on the same cores as the servers:
#
#   1. the single-node server: the highest offered push rate accepted and
#      delivered whole with p99 push-to-arrival <= 50 ms, JWTs reused
#      (-vapid-reuse 1h) and, once, signed afresh;
#   2. the single-node server: hello + register per second (15,000 new user
#      agents, 128 handshakes at a time);
#   3. the single-node server: RSS per idle connection and CPU at rest
#      (19,000 held 100 s, sampled every 15 s as a Prometheus would);
#   4. the single-node server: its CPU per push delivered at 1,000, 4,000,
#      8,000 and 12,000 pushes/s (JWTs reused), and the floor under it:
#      loadtest floor's bare Go transport at the same rates;
#   5. with PUSHPATH_CQL=1, the split tiers (autoconnect + autoendpoint) on
#      one local Cassandra node (CQL_HOSTS, else one started here and
#      stopped by its PID): pushes/s at p99 <= 50 ms, and hellos/s.
#
# Reports stay in loadtest/out/pushpath/. Run it on a quiet machine: the
# figures are the machine's, not the code's, when other work runs.
# PUSHPATH_SMOKE=1 runs every step at toy sizes, once (checks the script).
set -euo pipefail
cd "$(dirname "$0")/.."
repeats="${PUSHPATH_REPEATS:-3}"
out=loadtest/out/pushpath
rm -rf "$out" && mkdir -p "$out"

. tools/cql/owned.sh
trap stop_owned_cql EXIT
exit_on_signals

go build -o loadtest/out/bin/ ./loadtest/cmd/loadtest ./engine/cmd/autoconnect ./apitier/cmd/autoendpoint ./stack/cmd/autopush
lt() { loadtest/out/bin/loadtest "$1" -bin-dir loadtest/out/bin -progress off "${@:2}"; }

# best DIR...: the highest offered rate whose stage was accepted and
# delivered whole (nothing lost, at least 99.9% of the offered rate
# accepted) at p99 <= 50 ms, per report; then the median.
best() {
	python3 - "$@" <<'PY'
import json, statistics, sys
vals = []
for d in sys.argv[1:]:
    r = json.load(open(d + "/notify.json"))
    ok = [s["offered_per_s"] for s in r["notify"]["stages"]
          if s["latency"]["p99_ms"] <= 50 and s["account"]["lost"] == 0
          and s["accepted_per_s"] >= 0.999 * s["offered_per_s"]]
    vals.append(max(ok) if ok else 0)
print("runs", vals, "median", statistics.median(vals))
PY
}
# field SCENARIO KEY.PATH DIR...: a number from each report; the median.
field() {
	python3 - "$@" <<'PY'
import json, statistics, sys
scen, path, dirs = sys.argv[1], sys.argv[2].split("."), sys.argv[3:]
vals = []
for d in dirs:
    v = json.load(open(d + "/" + scen + ".json"))
    for p in path:
        v = v[p]
    vals.append(round(v, 1))
print("runs", vals, "median", statistics.median(vals))
PY
}

# per_push FILE LABEL DIR...: the server CPU per push of each stage of
# every report (notify's, or loadtest floor's by variant), by rate; medians.
per_push() {
	python3 - "$@" <<'PY'
import json, statistics, sys
name, label, dirs = sys.argv[1], sys.argv[2], sys.argv[3:]
per = {}
for d in dirs:
    r = json.load(open(d + "/" + name))
    for s in r.get("notify", r)["stages"]:
        key = (s.get("variant", ""), s["offered_per_s"])
        per.setdefault(key, []).append(round(s["server_cpu_us_per_push"], 1))
for (variant, rate), v in per.items():
    who = f"{label} ({variant})" if variant else label
    print(f"{who}, server CPU per push at {rate:,.0f}/s, µs: runs {v} median {statistics.median(v)}")
PY
}

# quiet waits (up to 30 s) until the machine was at least 90 % idle over
# a second: a run measures itself, not the previous run's aftermath (its
# processes exiting, the kernel freeing their sockets). The first hello
# run after the push ladders was the slowest of its three in both
# make pushpath runs of 2026-11-28 without it.
quiet() {
	python3 - <<'PY'
import time
def snap():
    f = [int(x) for x in open("/proc/stat").readline().split()[1:]]
    return f[3] + f[4], sum(f)
end = time.time() + 30
while time.time() < end:
    i0, t0 = snap(); time.sleep(1); i1, t1 = snap()
    if (i1 - i0) / max(t1 - t0, 1) >= 0.9:
        break
PY
}

uas=2000 rates=4000,6000,8000,10000,12000,14000,16000,18000 fresh=1000,2000,3000,4000,6000,8000 cqlrates=1000,2000,3000,4000,5000,6000,7000,8000
hellos=15000 idle=19000 idlehold=100s stage=15s cpurates=1000,4000,8000,12000
if [ "${PUSHPATH_SMOKE:-}" = 1 ]; then
	repeats=1 uas=100 rates=100,200 fresh=100 cqlrates=100 hellos=300 idle=300 idlehold=2s stage=2s cpurates=100,200,300,400
fi
ladder=(-uas "$uas" -rates "$rates" -stage-time "$stage" -warmup 1s -p99-limit 50ms -min-stages 1)
dirs=()
for i in $(seq "$repeats"); do
	quiet
	lt notify "${ladder[@]}" -vapid-reuse 1h -cql-hosts "" -out "$out/notify-reuse-$i" >/dev/null
	dirs+=("$out/notify-reuse-$i")
done
echo "single-node, pushes/s at p99 <= 50 ms, JWT reused: $(best "${dirs[@]}")"
quiet
lt notify -uas "$uas" -rates "$fresh" -stage-time "$stage" -warmup 1s -p99-limit 50ms -min-stages 1 \
	-cql-hosts "" -out "$out/notify-fresh" >/dev/null
echo "single-node, pushes/s at p99 <= 50 ms, every JWT signed afresh (one run): $(best "$out/notify-fresh")"

dirs=()
for i in $(seq "$repeats"); do
	quiet
	lt hold -single -cql-hosts "" -uas "$hellos" -per-engine 19000 -connect-rate 30000 -max-pending 128 -steps 1 \
		-settle 1s -samples 1 -hold 0s -budget 0 -out "$out/hello-$i" >/dev/null
	dirs+=("$out/hello-$i")
done
echo "single-node, hello + register per second: $(field hold connect.achieved_per_s "${dirs[@]}")"

dirs=()
for i in $(seq "$repeats"); do
	quiet
	lt hold -single -cql-hosts "" -uas "$idle" -per-engine 19000 -budget 0 -hold "$idlehold" -sample-every 15s \
		-out "$out/idle-$i" >/dev/null
	dirs+=("$out/idle-$i")
done
echo "single-node, RSS per idle connection (19,000), bytes: $(field hold hold.rss_bytes_per_conn "${dirs[@]}")"
echo "single-node, CPU holding 19,000 idle, % of a core: $(field hold hold.idle_cpu_percent "${dirs[@]}")"
echo "single-node, CPU per 10,000 idle connections, % of a core: $(field hold hold.idle_cpu_percent_per_10k_conns "${dirs[@]}")"

dirs=()
for i in $(seq "$repeats"); do
	quiet
	lt notify -uas "$uas" -rates "$cpurates" -stage-time "$stage" -warmup 1s -p99-limit 0 -min-stages 4 \
		-vapid-reuse 1h -cql-hosts "" -out "$out/cpu-$i" >/dev/null
	dirs+=("$out/cpu-$i")
done
per_push notify.json single-node "${dirs[@]}"

# The floor under those figures: a bare Go server at the same rates, as a
# POST answered 201 (http), with a websocket frame written and its ack
# read (push: net/http and gobwas/ws; loop: one gnet event loop), and with
# a synced 400-byte write before the answer (synced: a tracked push's
# least).
dirs=()
for i in $(seq "$repeats"); do
	quiet
	loadtest/out/bin/loadtest floor -rates "$cpurates" -stage-time "$stage" -uas "$uas" -out "$out/floor-$i" >/dev/null
	dirs+=("$out/floor-$i")
done
per_push floor.json floor "${dirs[@]}"

if [ "${PUSHPATH_CQL:-}" = 1 ]; then
	if [ -z "${CQL_HOSTS:-}" ]; then
		export CQL_HEAP="${CQL_HEAP:-2g}" CQL_HEAP_MIN="${CQL_HEAP_MIN:-1g}"
		start_owned_cql
	fi
	dirs=()
	for i in $(seq "$repeats"); do
		quiet
		lt notify -uas "$uas" -engines 1 -rates "$cqlrates" -stage-time "$stage" -warmup 1s -p99-limit 50ms \
			-min-stages 1 -vapid-reuse 1h -out "$out/cql-notify-$i" >/dev/null
		dirs+=("$out/cql-notify-$i")
	done
	echo "split tiers on Cassandra, pushes/s at p99 <= 50 ms, JWT reused: $(best "${dirs[@]}")"
	dirs=()
	for i in $(seq "$repeats"); do
		quiet
		lt hold -uas "$hellos" -engines 1 -per-engine 19000 -connect-rate 30000 -max-pending 128 -steps 1 \
			-settle 1s -samples 1 -hold 0s -budget 0 -out "$out/cql-hello-$i" >/dev/null
		dirs+=("$out/cql-hello-$i")
	done
	echo "split tiers on Cassandra, hello + register per second: $(field hold connect.achieved_per_s "${dirs[@]}")"
fi
