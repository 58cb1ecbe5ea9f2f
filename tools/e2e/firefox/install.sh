#!/usr/bin/env bash
# Installs Debian's firefox-esr for make e2e when it is missing and this
# shell may (root, apt-get). Otherwise it only says how: the test then
# fails in CI and skips elsewhere, with the same hint.
set -uo pipefail
command -v firefox-esr >/dev/null && exit 0
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
	echo "firefox-esr not found: apt-get install -y firefox-esr (as root), then make e2e" >&2
	exit 0
fi
echo "== installing firefox-esr (apt-get)" >&2
export DEBIAN_FRONTEND=noninteractive
log=$(mktemp)
# Refresh the package lists only when the install fails without it: a
# fresh machine may have none, but an update costs time on every run.
if ! apt-get install -y -q firefox-esr >"$log" 2>&1; then
	apt-get update -q >>"$log" 2>&1
	if ! apt-get install -y -q firefox-esr >>"$log" 2>&1; then
		tail -30 "$log" >&2
		echo "could not install firefox-esr (log: $log)" >&2
		exit 0
	fi
fi
rm -f "$log"
firefox-esr --version >&2 || echo "firefox-esr still not on PATH after apt-get install" >&2
exit 0
