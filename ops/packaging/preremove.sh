#!/bin/sh
# Before removal (.deb: "remove"; .rpm: 0, the last copy erased): stop
# and disable the unit when systemd runs. An upgrade (.deb "upgrade",
# .rpm 1) leaves it running; postinstall.sh restarts it.
set -e
case "$1" in
remove | 0) ;;
*) exit 0 ;;
esac
if [ -d /run/systemd/system ]; then
	systemctl stop autopush.service || true
	systemctl disable autopush.service >/dev/null 2>&1 || true
fi
exit 0
