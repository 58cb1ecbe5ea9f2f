#!/usr/bin/env bash
# Installs promtool, from Debian's prometheus package, when it is missing
# and this shell may (root, apt-get): ops/alerts_test.go checks and
# unit-tests ops/prometheus/alerts.yml with it. The package's service must
# not start (it would listen on :9090): a policy-rc.d that denies every
# start is in place while apt-get runs (one already there is kept), and
# the recommended node exporter is not installed. Otherwise it only says
# how: the test then fails in CI and skips elsewhere, with the same hint.
set -uo pipefail
command -v promtool >/dev/null && exit 0
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
	echo "promtool not found: apt-get install -y --no-install-recommends prometheus (as root)" >&2
	exit 0
fi
echo "== installing promtool (Debian's prometheus package, its service not started)" >&2
policy=/usr/sbin/policy-rc.d
ours=""
if [ ! -e "$policy" ]; then
	printf '#!/bin/sh\n# tools/promtool-install.sh: no service starts while it installs.\nexit 101\n' >"$policy"
	chmod 755 "$policy"
	ours=1
fi
export DEBIAN_FRONTEND=noninteractive
log=$(mktemp)
install() { apt-get install -y -q --no-install-recommends prometheus >>"$log" 2>&1; }
if ! install; then
	apt-get update -q >>"$log" 2>&1
	install || { tail -30 "$log" >&2; echo "could not install prometheus (log: $log)" >&2; }
fi
if [ -n "$ours" ]; then
	rm -f "$policy"
fi
command -v promtool >/dev/null && rm -f "$log"
exit 0
