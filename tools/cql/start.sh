#!/usr/bin/env bash
# Start a real Apache Cassandra node (from Maven Central) on 127.0.0.1 (or
# another loopback address: tools/cql/cluster.sh starts several as one cluster)
# for tests. On success prints exactly three shell-eval-able lines to stdout:
#
#   CQL_HOSTS=127.0.0.1:PORT
#   CQL_PID=12345
#   CQL_DIR=/tmp/cql.XXXXXX
#
# Everything else goes to stderr; exit status non-zero on failure (then no
# node is left running). Typical use (not `eval "$(start.sh)"` directly: eval
# of an empty string succeeds, hiding a failed start):
#
#   out=$(tools/cql/start.sh) || exit 1
#   eval "$out"; export CQL_HOSTS CQL_PID CQL_DIR
#   trap 'tools/cql/stop.sh' EXIT
#
# Environment (all optional):
#   CQL_DIR            directory for this node (config, data, logs); default: mktemp -d
#   CQL_HEAP           maximum JVM heap, -Xmx (default 1g)
#   CQL_HEAP_MIN       initial JVM heap, -Xms (default 256m); Cassandra mlockall()s
#                      what is committed at boot, so this is roughly the floor of RSS
#   CQL_START_TIMEOUT  seconds to wait for CQL to answer (default 180)
#   CQL_CLUSTER_NAME   cluster name (default autopush-test)
#   CQL_JVM_OPTS       extra JVM flags, whitespace-separated, appended last
#   CQL_CACHE_DIR      where the resolved classpath is cached
#                      (default ${XDG_CACHE_HOME:-~/.cache}/autopush-cql)
#   KEEP_CQL_DIR=1     keep the directory if startup fails
#   CQL_LISTEN         the node's address (default 127.0.0.1; a cluster on one
#                      machine puts its nodes on 127.0.0.1, 127.0.0.2, ...)
#   CQL_STORAGE_PORT   gossip port, CQL_NATIVE_PORT the CQL port (default: free
#                      ports; a cluster's nodes share both, on their own addresses)
#   CQL_SEEDS          seed list "host:port,..." (default: the node itself)
#   CQL_INITIAL_TOKEN  the node's token (a fresh cluster's nodes start together
#                      without bootstrapping when each is given its own)
#   CQL_RESTART=1      start the stopped node of CQL_DIR again: its
#                      cassandra.yaml, ports and data as they are
#   CQL_OWNER_PID      the process the node is for (a test, a script): once it
#                      ends, SIGKILL included, while the node runs, the node is
#                      stopped by its PID and its directory removed
#                      (owner-watch.sh, in a session of its own)
#   JAVA_HOME / JAVA   Java 17 to use
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
log() { printf 'cql: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

t0=$(date +%s.%N)
elapsed() { python3 -c "import sys; print('%.1f' % (float(sys.argv[2]) - float(sys.argv[1])))" "$t0" "$(date +%s.%N)"; }

command -v python3 >/dev/null || die "python3 is needed (free ports, CQL readiness probe: probe.py)"
if [[ -n "${JAVA:-}" ]]; then :
elif [[ -n "${JAVA_HOME:-}" && -x "$JAVA_HOME/bin/java" ]]; then JAVA=$JAVA_HOME/bin/java
else JAVA=$(command -v java) || die "java not found (need Java 17)"
fi
jv=$("$JAVA" -XshowSettings:properties -version 2>&1 | awk -F' = ' '/java.specification.version/ {print $2}')
[[ "$jv" == 17 ]] || log "warning: Java $jv found; Cassandra 5.0 supports Java 11 and 17 (flags here are for 17)"

HEAP=${CQL_HEAP:-1g}
HEAP_MIN=${CQL_HEAP_MIN:-256m}
TIMEOUT=${CQL_START_TIMEOUT:-180}
CLUSTER_NAME=${CQL_CLUSTER_NAME:-autopush-test}

# ---------------------------------------------------------------- classpath
# Resolved once per pom.xml content with Maven (local repo ~/.m2 as usual),
# then cached as a plain file; re-resolved if any jar went missing.
CACHE=${CQL_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/autopush-cql}
mkdir -p "$CACHE"
key=$(sha256sum "$HERE/pom.xml" | cut -c1-16)
cpfile=$CACHE/classpath-$key.txt

cp_ok() {
  [[ -s "$cpfile" ]] || return 1
  local jar jars
  IFS=: read -r -a jars <"$cpfile"
  (( ${#jars[@]} > 0 )) || return 1
  for jar in "${jars[@]}"; do [[ -f "$jar" ]] || return 1; done
}

if ! cp_ok; then
  command -v mvn >/dev/null || die "mvn not found"
  tmpcp=$(mktemp "$CACHE/classpath.XXXXXX")
  mvnargs=(-B -q -Dstyle.color=never -f "$HERE/pom.xml" dependency:build-classpath "-Dmdep.outputFile=$tmpcp")
  log "resolving Cassandra classpath with Maven..."
  if ! mvn -o "${mvnargs[@]}" >/dev/null 2>&1; then
    # (sed: Maven 3.8 still emits colour resets in batch/quiet mode)
    mvn "${mvnargs[@]}" 2>&1 | sed 's/\x1b\[[0-9;]*m//g' >&2 ||
      { rm -f "$tmpcp"; die "Maven could not resolve $HERE/pom.xml"; }
  fi
  mv -f "$tmpcp" "$cpfile"
  cp_ok || die "classpath from Maven is incomplete: $cpfile"
fi
CP=$(cat "$cpfile")
JAMM=
IFS=: read -r -a jars <"$cpfile" || true
for jar in "${jars[@]}"; do
  [[ "$jar" =~ /jamm-[0-9.]+\.jar$ ]] && { JAMM=$jar; break; }
done
[[ -n "$JAMM" ]] || die "jamm jar not on classpath"

# -------------------------------------------------------------------- ports
LISTEN=${CQL_LISTEN:-127.0.0.1}
[[ "$LISTEN" =~ ^127\.[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "CQL_LISTEN=$LISTEN is not a loopback address"
RESTART=${CQL_RESTART:-0}
if [[ $RESTART == 1 ]]; then
  [[ -n "${CQL_DIR:-}" && -f "$CQL_DIR/cassandra.yaml" ]] || die "CQL_RESTART=1 needs CQL_DIR of a node started before"
  # The node's identity is its yaml: address, ports, seeds, token.
  STORAGE_PORT=$(awk '/^storage_port:/ {print $2}' "$CQL_DIR/cassandra.yaml")
  NATIVE_PORT=$(awk '/^native_transport_port:/ {print $2}' "$CQL_DIR/cassandra.yaml")
  LISTEN=$(awk '/^listen_address:/ {print $2}' "$CQL_DIR/cassandra.yaml")
  CQL_SEEDS=$(sed -n 's/^ *- seeds: "\(.*\)"$/\1/p' "$CQL_DIR/cassandra.yaml")
elif [[ -n "${CQL_STORAGE_PORT:-}" && -n "${CQL_NATIVE_PORT:-}" ]]; then
  STORAGE_PORT=$CQL_STORAGE_PORT NATIVE_PORT=$CQL_NATIVE_PORT
else
# Two distinct free ports, held open together so they differ.
read -r STORAGE_PORT NATIVE_PORT < <(python3 - "$LISTEN" <<'EOF'
import socket, sys
socks = []
for _ in range(2):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind((sys.argv[1], 0))
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
for s in socks:
    s.close()
EOF
)
fi
SEEDS=${CQL_SEEDS:-$LISTEN:$STORAGE_PORT}

# ------------------------------------------------------------------ cleanup
# On any failure: stop the half-started node, drop the directory we made.
PID=
ok=0
created_dir=0
DIR=
alive() {  # PID exists and is not a zombie
  kill -0 "$PID" 2>/dev/null && ! grep -q '^State:.*zombie' "/proc/$PID/status" 2>/dev/null
}
cleanup() {
  [[ $ok == 1 ]] && return
  # A second signal must not cut the cleanup short: timeout(1) sends its
  # signal to the child and then to the whole process group again.
  trap '' HUP INT TERM
  if [[ -n "$PID" ]] && alive; then
    kill -TERM "$PID" 2>/dev/null || true
    for _ in $(seq 1 40); do alive || break; sleep 0.25; done
    alive && kill -KILL "$PID" 2>/dev/null
  fi
  [[ $created_dir == 1 && -n "$DIR" ]] || return 0
  if [[ "${KEEP_CQL_DIR:-0}" != 1 ]]; then
    rm -rf "$DIR"
  else
    log "node directory kept: $DIR"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

OWNER_START=
if [[ -n "${CQL_OWNER_PID:-}" ]]; then
  [[ "$CQL_OWNER_PID" =~ ^[0-9]+$ ]] || die "CQL_OWNER_PID=$CQL_OWNER_PID is not a PID"
  OWNER_START=$(bash "$HERE/started.sh" "$CQL_OWNER_PID")
  [[ -n "$OWNER_START" ]] || die "CQL_OWNER_PID=$CQL_OWNER_PID: no such process"
fi

# ---------------------------------------------------------------- directory
if [[ -n "${CQL_DIR:-}" ]]; then
  DIR=$CQL_DIR
  mkdir -p "$DIR"
else
  DIR=$(mktemp -d "${TMPDIR:-/tmp}/cql.XXXXXX")
  created_dir=1
fi
DIR=$(cd "$DIR" && pwd)
# CQL_DIR is also what start.sh prints, so an exported CQL_DIR of a node that
# is still running must not be shared by a second node.
if [[ -f "$DIR/cassandra.pid" ]]; then
  oldpid=$(cat "$DIR/cassandra.pid")
  oldcmd=
  if [[ "$oldpid" =~ ^[0-9]+$ && -r "/proc/$oldpid/cmdline" ]]; then
    oldcmd=$(tr '\0' ' ' <"/proc/$oldpid/cmdline" 2>/dev/null) || true
  fi
  if [[ "$oldcmd" == *org.apache.cassandra.service.CassandraDaemon* ]]; then
    die "$DIR is in use by running node pid $oldpid (unset CQL_DIR to get a fresh directory)"
  fi
fi
mkdir -p "$DIR"/{data,commitlog,saved_caches,hints,cdc_raw,logs,tmp,triggers}
: >"$DIR/.autopush-cql-node"   # marker: stop.sh only deletes dirs carrying it

if [[ $RESTART != 1 ]]; then
  sed -e "s|@CLUSTER_NAME@|$CLUSTER_NAME|g" \
      -e "s|@DIR@|$DIR|g" \
      -e "s|@LISTEN@|$LISTEN|g" \
      -e "s|@SEEDS@|$SEEDS|g" \
      -e "s|@STORAGE_PORT@|$STORAGE_PORT|g" \
      -e "s|@NATIVE_PORT@|$NATIVE_PORT|g" \
      "$HERE/cassandra.yaml" >"$DIR/cassandra.yaml"
  if [[ -n "${CQL_INITIAL_TOKEN:-}" ]]; then
    [[ "$CQL_INITIAL_TOKEN" =~ ^-?[0-9]+$ ]] || die "CQL_INITIAL_TOKEN=$CQL_INITIAL_TOKEN is not a token"
    # Given tokens: the nodes of a new cluster start at once, none
    # streaming data from the others (there is none yet).
    printf 'initial_token: %s\nauto_bootstrap: false\n' "$CQL_INITIAL_TOKEN" >>"$DIR/cassandra.yaml"
  fi
fi

cat >"$DIR/logback.xml" <<EOF
<configuration>
  <appender name="FILE" class="ch.qos.logback.core.FileAppender">
    <file>$DIR/logs/system.log</file>
    <encoder><pattern>%-5level [%thread] %date{ISO8601} %F:%L - %msg%n</pattern></encoder>
  </appender>
  <logger name="org.apache.cassandra" level="INFO"/>
  <root level="INFO"><appender-ref ref="FILE"/></root>
</configuration>
EOF

# ---------------------------------------------------------------- JVM flags
jvm=(
  -Xms"$HEAP_MIN" -Xmx"$HEAP" -Xss256k
  # C1 only: about half the startup time on 2 cores, and less CPU taken
  # from the tests; a test node never needs C2's peak throughput.
  # CQL_JVM_OPTS=-XX:TieredStopAtLevel=4 turns C2 back on.
  -XX:TieredStopAtLevel=1
  -XX:+UseG1GC -XX:+ParallelRefProcEnabled -XX:MaxTenuringThreshold=1
  -XX:G1RSetUpdatingPauseTimePercent=5 -XX:MaxGCPauseMillis=300
  -XX:+PerfDisableSharedMem -XX:+ExitOnOutOfMemoryError
  -XX:ErrorFile="$DIR/logs/hs_err_%p.log"
  -ea -da:net.openhft...
  -Djava.net.preferIPv4Stack=true
  -Djava.io.tmpdir="$DIR/tmp"
  # Java 17 module access Cassandra needs (from conf/jvm17-server.options).
  -Djdk.attach.allowAttachSelf=true
  --add-exports java.base/jdk.internal.misc=ALL-UNNAMED
  --add-exports java.management.rmi/com.sun.jmx.remote.internal.rmi=ALL-UNNAMED
  --add-exports java.rmi/sun.rmi.registry=ALL-UNNAMED
  --add-exports java.rmi/sun.rmi.server=ALL-UNNAMED
  --add-exports java.sql/java.sql=ALL-UNNAMED
  --add-exports java.base/java.lang.ref=ALL-UNNAMED
  --add-exports jdk.unsupported/sun.misc=ALL-UNNAMED
  --add-exports jdk.compiler/com.sun.tools.javac.file=ALL-UNNAMED
  --add-exports jdk.attach/sun.tools.attach=ALL-UNNAMED
  --add-opens java.base/java.lang.module=ALL-UNNAMED
  --add-opens java.base/jdk.internal.loader=ALL-UNNAMED
  --add-opens java.base/jdk.internal.ref=ALL-UNNAMED
  --add-opens java.base/jdk.internal.reflect=ALL-UNNAMED
  --add-opens java.base/jdk.internal.math=ALL-UNNAMED
  --add-opens java.base/jdk.internal.module=ALL-UNNAMED
  --add-opens java.base/jdk.internal.util.jar=ALL-UNNAMED
  --add-opens jdk.management/com.sun.management.internal=ALL-UNNAMED
  --add-opens java.base/sun.nio.ch=ALL-UNNAMED
  --add-opens java.base/java.io=ALL-UNNAMED
  --add-opens java.base/java.lang.reflect=ALL-UNNAMED
  --add-opens jdk.compiler/com.sun.tools.javac=ALL-UNNAMED
  --add-opens java.base/java.lang=ALL-UNNAMED
  --add-opens java.base/java.util=ALL-UNNAMED
  -Dio.netty.tryReflectionSetAccessible=true
  -Dio.netty.allocator.useCacheForAllThreads=true
  -Dio.netty.allocator.maxOrder=11
  # Object sizing for memtable accounting (cassandra-env.sh does the same).
  -javaagent:"$JAMM"
  # Never phone home (Chronicle Queue is on the classpath for audit/FQL).
  -Dchronicle.analytics.disable=true
  -Dchronicle.announcer.disable=true
  # The node itself.
  -Dcassandra-foreground=yes
  -Dcassandra.config="file://$DIR/cassandra.yaml"
  -Dcassandra.storagedir="$DIR"
  -Dcassandra.logdir="$DIR/logs"
  -Dcassandra.triggers_dir="$DIR/triggers"
  -Dlogback.configurationFile="$DIR/logback.xml"
  # Fast single-node startup.
  -Dcassandra.ring_delay_ms=1000
  -Dcassandra.skip_wait_for_gossip_to_settle=0
  -Dcassandra.superuser_setup_delay_ms=0
  -Dcassandra.load_ring_state=false
  # Fast SIGTERM: no 2 s wait telling (non-existent) peers we are leaving.
  -Dcassandra.shutdown_announce_in_ms=0
)
# shellcheck disable=SC2206
jvm+=(${CQL_JVM_OPTS:-})

# ------------------------------------------------------------------- launch
log "starting Cassandra in $DIR (storage $LISTEN:$STORAGE_PORT, CQL $LISTEN:$NATIVE_PORT, seeds $SEEDS)"
# setsid: own session, so the node outlives this script and its terminal;
# exec'd in place, so $! is the java process itself.
setsid "$JAVA" "${jvm[@]}" -cp "$CP" org.apache.cassandra.service.CassandraDaemon \
  </dev/null >"$DIR/logs/stdout.log" 2>&1 &
PID=$!
echo "$PID" >"$DIR/cassandra.pid"
if [[ -n "$OWNER_START" ]]; then
  # Its own session: a signal to this script's process group (timeout(1)'s)
  # must not end the watcher with its owner.
  setsid bash "$HERE/owner-watch.sh" "$CQL_OWNER_PID" "$OWNER_START" "$PID" "$(bash "$HERE/started.sh" "$PID")" "$DIR" \
    </dev/null >>"$DIR/logs/owner-watch.log" 2>&1 &
fi

logtail() {
  log "---- last lines of $DIR/logs/system.log ----"
  tail -n 60 "$DIR/logs/system.log" 2>/dev/null | cut -c1-400 >&2 || true
  if [[ -s "$DIR/logs/stdout.log" ]]; then
    log "---- last lines of $DIR/logs/stdout.log ----"
    tail -n 30 "$DIR/logs/stdout.log" | cut -c1-400 >&2 || true
  fi
}

# Ready = the native port completes a CQL handshake (STARTUP -> READY) and
# answers a real query (SELECT release_version FROM system.local).
probe() {
  python3 "$HERE/probe.py" version "$LISTEN" "$NATIVE_PORT"
}

deadline=$(( $(date +%s) + TIMEOUT ))
version=
while :; do
  if ! alive; then
    logtail
    die "Cassandra (pid $PID) exited during startup"
  fi
  if version=$(probe); then break; fi
  if (( $(date +%s) >= deadline )); then
    logtail
    die "Cassandra did not answer CQL on $LISTEN:$NATIVE_PORT within ${TIMEOUT}s"
  fi
  sleep 0.5
done

ok=1
log "Cassandra $version ready on $LISTEN:$NATIVE_PORT after $(elapsed)s (pid $PID)"
printf 'CQL_HOSTS=%s:%s\n' "$LISTEN" "$NATIVE_PORT"
printf 'CQL_PID=%s\n' "$PID"
printf 'CQL_DIR=%q\n' "$DIR"
