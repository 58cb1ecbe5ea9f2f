#!/usr/bin/env bash
# Installs Debian's packages for make e2e when they are missing and this
# shell may (root, apt-get): firefox-esr, and for the TLS run nginx and
# certutil (libnss3-tools). Otherwise it only says how: the tests then
# fail in CI and skip elsewhere, with the same hint.
#
#   install.sh [command:package ...]   (default: firefox-esr:firefox-esr)
set -uo pipefail
[ $# -gt 0 ] || set -- firefox-esr:firefox-esr
PATH=$PATH:/usr/sbin:/sbin # nginx lives in /usr/sbin
missing=()
for pair in "$@"; do
	command -v "${pair%%:*}" >/dev/null || missing+=("${pair#*:}")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
	echo "not installed: ${missing[*]}: apt-get install -y ${missing[*]} (as root), then make e2e" >&2
	exit 0
fi
echo "== installing ${missing[*]} (apt-get)" >&2
export DEBIAN_FRONTEND=noninteractive
log=$(mktemp)
# Refresh the package lists only when the install fails without it: a
# fresh machine may have none, but an update costs time on every run.
if ! apt-get install -y -q "${missing[@]}" >"$log" 2>&1; then
	apt-get update -q >>"$log" 2>&1
	if ! apt-get install -y -q "${missing[@]}" >>"$log" 2>&1; then
		tail -30 "$log" >&2
		echo "could not install ${missing[*]} (log: $log)" >&2
		exit 0
	fi
fi
rm -f "$log"
for pair in "$@"; do
	command -v "${pair%%:*}" >/dev/null || echo "${pair%%:*} still not on PATH after apt-get install ${pair#*:}" >&2
done
exit 0
