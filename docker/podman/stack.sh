#!/usr/bin/env bash
# Runs docker-compose.yml under podman on a machine with no image registry
# (ops/podman_test.go drives it; make test runs that):
#
#   stack.sh up      prints STATE=DIR and KEY=VALUE lines (container IDs,
#                    ports) on stdout; everything else goes to stderr
#   stack.sh restart STATE   restarts the stack's containers, by ID
#   stack.sh down STATE      compose down -v, then checks by ID that no
#                    container, volume or network of the stack is left
#
# up: Debian's podman, podman-compose and mmdebstrap (installed when
# missing and root; exit 3 when they cannot be), a Debian root file
# system with a Java 17 runtime made with mmdebstrap and imported as an
# image (cached by the content of its recipe), Cassandra 5 from Maven
# Central (tools/cql/pom.xml) on it (docker/cassandra, cached by content),
# the Go binaries built on the host, then the compose file with
# docker/podman/compose.override.yml: scylla (Cassandra), the schema job,
# autoconnect and autoendpoint. Prometheus and Grafana are left out:
# their images cannot be had without a registry.
#
# Environment: WS_PORT, PUSH_PORT, NODE_PORT (host ports on 127.0.0.1,
# default free ones), PROJECT (compose project, default autopush-podman-PID).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
log() { printf 'podman-stack: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }
t0=$SECONDS
took() { log "$1 ($((SECONDS - t0)) s so far)"; }

# Podman as this machine runs it: runc (crun fails on the cgroup layout)
# with cgroupfs, and every container's default limits at or below this
# process's hard limits (podman's defaults, 1048576 files and 4194304
# processes, cannot be set here). RLIMIT_NPROC above the kernel's pid_max
# is refused too (seen: 32768 works, 32769 does not).
write_conf() {
	local nofile nproc pidmax
	nofile=$(ulimit -Hn) nproc=$(ulimit -Hu) pidmax=$(cat /proc/sys/kernel/pid_max)
	[ "$nofile" != unlimited ] || nofile=1048576
	[ "$nproc" != unlimited ] && [ "$nproc" -le "$pidmax" ] || nproc=$pidmax
	cat >"$1" <<EOF
[containers]
default_ulimits = ["nofile=$nofile:$nofile", "nproc=$nproc:$nproc"]
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
EOF
	echo "$nofile $nproc"
}

# No intermediate images: each build would leave one of the whole build
# context (hundreds of MB) behind.
export BUILDAH_LAYERS=false

compose() {
	podman-compose --project-name "$PROJECT" -f "$ROOT/docker-compose.yml" \
		-f "$ROOT/docker/podman/compose.override.yml" "$@" >>"$STATE/compose.log" 2>&1
}

# ------------------------------------------------------------------ images
# A Debian root file system with a Java 17 runtime, python3 (Cassandra's
# probe) and CA roots, imported as localhost/autopush-debian:KEY, KEY the
# hash of this recipe.
DEBIAN_RECIPE=(--variant=essential --include=openjdk-17-jre-headless,python3-minimal,ca-certificates
	--setup-hook='mkdir -p "$1"/usr/share/man/man1'
	--dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*'
	--dpkgopt='path-exclude=/usr/share/locale/*' bookworm)
debian_image() {
	local key tar
	key=$(printf '%s\n' "${DEBIAN_RECIPE[@]}" | sha256sum | cut -c1-16)
	DEBIAN_IMAGE=localhost/autopush-debian:$key
	podman image exists "$DEBIAN_IMAGE" && return
	log "making $DEBIAN_IMAGE with mmdebstrap (Debian bookworm from deb.debian.org)"
	tar=$STATE/debian.tar
	mmdebstrap --quiet "${DEBIAN_RECIPE[@]}" "$tar" http://deb.debian.org/debian >"$STATE/mmdebstrap.log" 2>&1 ||
		{ tail -20 "$STATE/mmdebstrap.log" >&2; die "mmdebstrap failed (log: $STATE/mmdebstrap.log)"; }
	podman import --quiet --change 'CMD ["/bin/sh"]' "$tar" "$DEBIAN_IMAGE" >/dev/null
	rm -f "$tar"
}

# Cassandra's jars (tools/cql/pom.xml's runtime classpath), kept per pom
# content under the user's cache.
cassandra_jars() {
	local cache key
	cache=${XDG_CACHE_HOME:-$HOME/.cache}/autopush-podman
	key=$(sha256sum "$ROOT/tools/cql/pom.xml" | cut -c1-16)
	JARS=$cache/cassandra-lib-$key
	[ -f "$JARS/.complete" ] && return
	command -v mvn >/dev/null || die "mvn not found (apt-get install maven)"
	rm -rf "$JARS" && mkdir -p "$JARS"
	local args=(-B -q -f "$ROOT/tools/cql/pom.xml" dependency:copy-dependencies "-DoutputDirectory=$JARS")
	mvn -o "${args[@]}" >/dev/null 2>&1 || mvn "${args[@]}" >&2 || die "Maven could not fetch Cassandra's jars"
	: >"$JARS/.complete"
}

cassandra_image() {
	local ctx key f
	cassandra_jars
	ctx=$STATE/cassandra
	mkdir -p "$ctx"
	cp -r "$JARS" "$ctx/lib"
	cp "$ROOT/tools/cql/cassandra.yaml" "$ROOT/tools/cql/probe.py" "$ROOT/docker/cassandra/entrypoint.sh" "$ROOT/docker/cassandra/cqlsh" "$ctx/"
	key=$( (cd "$ctx" && for f in cassandra.yaml probe.py entrypoint.sh cqlsh; do sha256sum "$f"; done
		sha256sum "$ROOT/docker/cassandra/Dockerfile" "$ROOT/tools/cql/pom.xml" | cut -c1-64
		echo "$DEBIAN_IMAGE") | sha256sum | cut -c1-16)
	CASSANDRA_IMAGE=localhost/autopush-cassandra:$key
	if ! podman image exists "$CASSANDRA_IMAGE"; then
		log "building $CASSANDRA_IMAGE"
		podman build --quiet -f "$ROOT/docker/cassandra/Dockerfile" --build-arg "BASE_IMAGE=$DEBIAN_IMAGE" \
			-t "$CASSANDRA_IMAGE" "$ctx" >"$STATE/cassandra-build.log" 2>&1 ||
			{ tail -20 "$STATE/cassandra-build.log" >&2; die "the Cassandra image did not build"; }
	fi
	rm -rf "$ctx"
}

# The binaries the Dockerfile would build, built here the same way (its
# PREBUILT path): the packages are read from the Dockerfile itself.
binaries() {
	local pkgs
	mapfile -t pkgs < <(grep -oE '\./[a-z/]+/cmd/[a-z]+' "$ROOT/docker/Dockerfile")
	[ ${#pkgs[@]} -gt 0 ] || die "no packages found in docker/Dockerfile"
	rm -rf "$ROOT/docker/prebuilt" && mkdir -p "$ROOT/docker/prebuilt"
	(cd "$ROOT" && CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags="-s -w" -o docker/prebuilt/ "${pkgs[@]}")
}

# ---------------------------------------------------------------- running
# wait_healthy ID: runs the compose file's health check of scylla in the
# container until it passes. Not `podman healthcheck run`: podman-compose
# 1.0.3 hands podman a CMD health check joined into one word
# (/bin/sh -c cqlsh' '-e' ''SELECT ...'), which can never pass.
wait_healthy() {
	local id=$1 deadline=$((SECONDS + ${2:-300})) check
	# podman-compose's own Python, which has PyYAML.
	mapfile -d '' -t check < <(/usr/bin/python3 -c 'import sys, yaml
test = yaml.safe_load(open(sys.argv[1]))["services"]["scylla"]["healthcheck"]["test"]
assert test[0] == "CMD", test
sys.stdout.write("\0".join(test[1:]))' "$ROOT/docker-compose.yml")
	until podman exec "$id" "${check[@]}" >/dev/null 2>&1; do
		[ "$(podman inspect -f '{{.State.Running}}' "$id")" = true ] ||
			{ podman logs --tail 30 "$id" >&2; die "container $id stopped"; }
		[ $SECONDS -lt $deadline ] || { podman logs --tail 30 "$id" >&2; die "container $id not healthy in time"; }
		sleep 1
	done
}

id_of() { podman inspect -f '{{.Id}}' "${PROJECT}_$1_1"; }

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

prereqs() {
	bash "$ROOT/tools/e2e/firefox/install.sh" podman:podman podman-compose:podman-compose mmdebstrap:mmdebstrap runc:runc
	local c
	for c in podman podman-compose mmdebstrap runc go python3; do
		command -v "$c" >/dev/null || { log "$c is missing: apt-get install -y podman podman-compose mmdebstrap runc (as root)"; exit 3; }
	done
	[ "$(id -u)" = 0 ] || { log "rootful podman is needed (run as root)"; exit 3; }
}

up() {
	prereqs
	PROJECT=${PROJECT:-autopush-podman-$$}
	STATE=$(mktemp -d "${TMPDIR:-/tmp}/podman-stack.XXXXXX")
	export CONTAINERS_CONF=$STATE/containers.conf
	read -r AUTOCONNECT_NOFILE PODMAN_NPROC < <(write_conf "$CONTAINERS_CONF")
	WS_PORT=${WS_PORT:-$(free_port)} PUSH_PORT=${PUSH_PORT:-$(free_port)} NODE_PORT=${NODE_PORT:-$(free_port)}
	{
		echo "STATE=$STATE"
		echo "PROJECT=$PROJECT"
		echo "CONTAINERS_CONF=$CONTAINERS_CONF"
		echo "NETWORK=${PROJECT}_default"
	} >"$STATE/env"
	# A failed start leaves nothing running.
	trap 'down "$STATE" >&2 || true' EXIT
	echo "STATE=$STATE"
	debian_image && took "Debian image $DEBIAN_IMAGE"
	cassandra_image && took "Cassandra image $CASSANDRA_IMAGE"
	binaries && took "binaries built on the host (docker/prebuilt)"
	export AUTOCONNECT_NOFILE PODMAN_NPROC DEBIAN_IMAGE CASSANDRA_IMAGE WS_PORT PUSH_PORT NODE_PORT
	export ENDPOINT_URL=http://127.0.0.1:$PUSH_PORT COMMIT=$(git -C "$ROOT" rev-parse HEAD 2>/dev/null || echo unknown)
	export CRYPTO_KEY=${CRYPTO_KEY:-$("$ROOT/docker/prebuilt/autokey")} NODE_SECRET=${NODE_SECRET:-$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')}
	# Everything compose interpolates, for restart and down too.
	local v
	for v in DEBIAN_IMAGE CASSANDRA_IMAGE AUTOCONNECT_NOFILE WS_PORT PUSH_PORT NODE_PORT ENDPOINT_URL COMMIT CRYPTO_KEY NODE_SECRET PODMAN_NPROC; do
		printf 'export %s=%q\n' "$v" "${!v}" >>"$STATE/vars"
	done
	compose build
	local svc
	for svc in schema autoconnect autoendpoint; do
		podman image exists "localhost/${PROJECT}_$svc" || podman image exists "${PROJECT}_$svc" ||
			{ tail -30 "$STATE/compose.log" >&2; die "image of $svc not built (log: $STATE/compose.log)"; }
		echo "IMAGE_$svc=${PROJECT}_$svc" >>"$STATE/env"
	done
	took "images built by podman-compose"
	# podman-compose 1.0.3 starts dependencies without waiting for their
	# conditions (service_healthy, service_completed_successfully): each
	# step waits here.
	compose up -d scylla
	SCYLLA=$(id_of scylla) && echo "SCYLLA=$SCYLLA" >>"$STATE/env"
	wait_healthy "$SCYLLA" && took "scylla (Cassandra) healthy"
	compose up -d --no-deps schema
	SCHEMA=$(id_of schema) && echo "SCHEMA=$SCHEMA" >>"$STATE/env"
	[ "$(podman wait "$SCHEMA")" = 0 ] || { podman logs "$SCHEMA" >&2; die "the schema job failed"; }
	took "schema applied"
	compose up -d --no-deps autoconnect autoendpoint
	AUTOCONNECT=$(id_of autoconnect) && echo "AUTOCONNECT=$AUTOCONNECT" >>"$STATE/env"
	AUTOENDPOINT=$(id_of autoendpoint) && echo "AUTOENDPOINT=$AUTOENDPOINT" >>"$STATE/env"
	printf '%s\n' "WS_PORT=$WS_PORT" "PUSH_PORT=$PUSH_PORT" "NODE_PORT=$NODE_PORT" >>"$STATE/env"
	grep -v '^STATE=' "$STATE/env"
	trap - EXIT
	took "up"
}

load() {
	STATE=${1:?STATE directory}
	# shellcheck disable=SC1091
	. "$STATE/env"
	# shellcheck disable=SC1091
	[ ! -f "$STATE/vars" ] || . "$STATE/vars"
	export CONTAINERS_CONF
}

restart() {
	load "$1"
	# All at once, as after a host restart: the tiers retry storage while
	# Cassandra starts.
	podman restart --time 60 "$SCYLLA" "$AUTOCONNECT" "$AUTOENDPOINT" >/dev/null
	wait_healthy "$SCYLLA"
	took "restarted"
}

down() {
	load "$1"
	local ids id left=0
	ids=$(grep -E '^(SCYLLA|SCHEMA|AUTOCONNECT|AUTOENDPOINT)=' "$STATE/env" | cut -d= -f2)
	compose down -v -t 60 || true
	# What compose down left, by ID and exact name only.
	for id in $ids; do
		if podman container exists "$id"; then
			log "container $id left by compose down: removing it by ID"
			podman rm -f -t 10 "$id" >/dev/null
			left=1
		fi
	done
	if podman network exists "$NETWORK"; then podman network rm "$NETWORK" >/dev/null; fi
	# The stack's images (named after its project, so every run makes
	# new ones); the base images stay, cached by content.
	for id in $(grep -E '^IMAGE_' "$STATE/env" | cut -d= -f2); do
		if podman image exists "$id"; then podman rmi "$id" >/dev/null; fi
	done
	for id in $(podman volume ls -q --filter "label=io.podman.compose.project=$PROJECT"); do
		log "volume $id left: removing it"
		podman volume rm "$id" >/dev/null
		left=1
	done
	for id in $ids; do
		! podman container exists "$id" || die "container $id still exists"
	done
	rm -rf "$ROOT/docker/prebuilt" "$STATE"
	[ $left = 0 ] || die "compose down left containers or volumes (removed since)"
	took "down"
}

case "${1:-}" in
up) up ;;
restart) restart "${2:-}" ;;
down) down "${2:-}" ;;
*) echo "usage: $0 up | restart STATE | down STATE" >&2; exit 2 ;;
esac
