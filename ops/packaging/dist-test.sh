#!/usr/bin/env bash
# make dist-test: make dist for this machine's architecture, then
# ops/dist_test.go: the .deb installed with dpkg, the unit's command run
# as the unit says, pushsend smoke against it, the package removed and
# purged (and whatever the test made, on every way out); the .rpm's
# files and scripts read with rpm. It installs packages on this machine:
# root and dpkg are needed, and Debian's rpm (installed when missing).
# Without them it fails under CI=true and skips elsewhere, saying so.
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ "$(id -u)" != 0 ] || ! command -v dpkg >/dev/null; then
	msg="make dist-test installs a .deb: run it as root on Debian (dpkg)"
	if [ "${CI:-}" = true ]; then
		echo "FAILED: $msg" >&2
		exit 1
	fi
	echo "--- SKIP: make dist-test: $msg" >&2
	exit 0
fi
bash tools/e2e/firefox/install.sh rpm:rpm

# The test removes what it installs on every way out it sees (t.Cleanup);
# this catches the ones it does not (a timeout's panic, a signal): what
# was not here before goes. The server runs as the autopush user, whose
# Pdeathsig the uid change cleared: when this run made the user, its
# processes are the test's, stopped by their PIDs.
had() { "$@" >/dev/null 2>&1 && echo yes || echo no; }
had_pkg=$(had dpkg-query -W autopush) had_user=$(had getent passwd autopush)
had_group=$(had getent group autopush) had_dir=$(had test -e /var/lib/autopush)
cleanup() {
	trap '' HUP INT TERM
	if [ "$had_user" = no ] && getent passwd autopush >/dev/null; then
		pids=$(ps -o pid= -u autopush || true)
		[ -z "$pids" ] || kill -KILL $pids 2>/dev/null || true
	fi
	[ "$had_pkg" = yes ] || dpkg --purge autopush >/dev/null 2>&1 || true
	[ "$had_user" = yes ] || ! getent passwd autopush >/dev/null || userdel autopush || true
	[ "$had_group" = yes ] || ! getent group autopush >/dev/null || groupdel autopush || true
	[ "$had_dir" = yes ] || rm -rf /var/lib/autopush
}
trap cleanup EXIT
trap 'exit 143' HUP INT TERM
export VERSION=${VERSION:-$(bash ops/packaging/version.sh)}
DIST_ARCHS=$(go env GOARCH) bash ops/packaging/dist.sh
debs=(dist/*.deb) rpms=(dist/*.rpm)
AUTOPUSH_DIST_VERSION=$VERSION AUTOPUSH_DIST_DEB=${debs[0]} AUTOPUSH_DIST_RPM=${rpms[0]} \
	go test -count=1 -v -timeout "${DIST_TEST_TIMEOUT:-10m}" -run '^(TestPackageMatchesUnit|TestDebInstall|TestRPMContents)$' ./ops/
