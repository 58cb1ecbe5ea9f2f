#!/bin/sh
# Starts one Cassandra node in the foreground on the container's address,
# CQL on 9042, its data under CASSANDRA_DATA (the compose file mounts the
# scylla service's volume at /var/lib/scylla). ScyllaDB's flags, which the
# compose file passes as the command, mean nothing here and are ignored;
# a command that is not a flag runs instead (podman run IMAGE sh).
set -eu
case "${1:-}" in
"" | -*) ;;
*) exec "$@" ;;
esac
[ "$#" -eq 0 ] || echo "cassandra: ignoring ScyllaDB's flags: $*" >&2

HERE=/opt/cassandra
DIR=${CASSANDRA_DATA:-/var/lib/cassandra}
HEAP=${CASSANDRA_HEAP:-768m}
# The address other containers reach; written afresh at every start, so a
# restarted container that got another address still starts.
ADDR=$(getent hosts "$(cat /etc/hostname)" | cut -d' ' -f1 | head -n1)
[ -n "$ADDR" ] || { echo "cassandra: no address for $(cat /etc/hostname)" >&2; exit 1; }
mkdir -p "$DIR/data" "$DIR/commitlog" "$DIR/saved_caches" "$DIR/hints" "$DIR/cdc_raw" /tmp/cassandra
sed -e "s|@CLUSTER_NAME@|autopush|g" -e "s|@DIR@|$DIR|g" -e "s|@LISTEN@|$ADDR|g" \
	-e "s|@SEEDS@|$ADDR:7000|g" -e "s|@STORAGE_PORT@|7000|g" -e "s|@NATIVE_PORT@|9042|g" \
	"$HERE/cassandra.yaml" >/tmp/cassandra/cassandra.yaml
# The log on stdout (podman logs), INFO and up.
cat >/tmp/cassandra/logback.xml <<'XML'
<configuration>
  <appender name="OUT" class="ch.qos.logback.core.ConsoleAppender">
    <encoder><pattern>%-5level %date{ISO8601} %F:%L - %msg%n</pattern></encoder>
  </appender>
  <root level="INFO"><appender-ref ref="OUT"/></root>
</configuration>
XML
JAMM=$(ls "$HERE"/lib/jamm-*.jar | head -n1)

# Java 17 module access and object sizing Cassandra needs (its
# conf/jvm17-server.options and cassandra-env.sh); C1 only, which halves
# the start on small machines.
exec java -Xms256m -Xmx"$HEAP" -Xss256k -XX:TieredStopAtLevel=1 -XX:+UseG1GC \
	-XX:+ExitOnOutOfMemoryError -XX:+PerfDisableSharedMem \
	-Djava.net.preferIPv4Stack=true -Djava.io.tmpdir=/tmp/cassandra \
	-Djdk.attach.allowAttachSelf=true \
	--add-exports java.base/jdk.internal.misc=ALL-UNNAMED \
	--add-exports java.management.rmi/com.sun.jmx.remote.internal.rmi=ALL-UNNAMED \
	--add-exports java.rmi/sun.rmi.registry=ALL-UNNAMED \
	--add-exports java.rmi/sun.rmi.server=ALL-UNNAMED \
	--add-exports java.sql/java.sql=ALL-UNNAMED \
	--add-exports java.base/java.lang.ref=ALL-UNNAMED \
	--add-exports jdk.unsupported/sun.misc=ALL-UNNAMED \
	--add-exports jdk.compiler/com.sun.tools.javac.file=ALL-UNNAMED \
	--add-exports jdk.attach/sun.tools.attach=ALL-UNNAMED \
	--add-opens java.base/java.lang.module=ALL-UNNAMED \
	--add-opens java.base/jdk.internal.loader=ALL-UNNAMED \
	--add-opens java.base/jdk.internal.ref=ALL-UNNAMED \
	--add-opens java.base/jdk.internal.reflect=ALL-UNNAMED \
	--add-opens java.base/jdk.internal.math=ALL-UNNAMED \
	--add-opens java.base/jdk.internal.module=ALL-UNNAMED \
	--add-opens java.base/jdk.internal.util.jar=ALL-UNNAMED \
	--add-opens jdk.management/com.sun.management.internal=ALL-UNNAMED \
	--add-opens java.base/sun.nio.ch=ALL-UNNAMED \
	--add-opens java.base/java.io=ALL-UNNAMED \
	--add-opens java.base/java.lang.reflect=ALL-UNNAMED \
	--add-opens jdk.compiler/com.sun.tools.javac=ALL-UNNAMED \
	--add-opens java.base/java.lang=ALL-UNNAMED \
	--add-opens java.base/java.util=ALL-UNNAMED \
	-Dio.netty.tryReflectionSetAccessible=true \
	-javaagent:"$JAMM" \
	-Dchronicle.analytics.disable=true -Dchronicle.announcer.disable=true \
	-Dcassandra-foreground=yes -Dlogback.configurationFile=/tmp/cassandra/logback.xml \
	-Dcassandra.config=file:///tmp/cassandra/cassandra.yaml \
	-Dcassandra.storagedir="$DIR" -Dcassandra.logdir=/tmp/cassandra \
	-Dcassandra.ring_delay_ms=1000 -Dcassandra.skip_wait_for_gossip_to_settle=0 \
	-Dcassandra.superuser_setup_delay_ms=0 -Dcassandra.shutdown_announce_in_ms=0 \
	-cp "$HERE/lib/*" org.apache.cassandra.service.CassandraDaemon
