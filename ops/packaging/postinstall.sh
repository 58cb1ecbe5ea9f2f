#!/bin/sh
# After install or upgrade (.deb: "configure"; .rpm: 1 or 2): the
# service user and group, the state directory the unit's StateDirectory
# names, the env file readable by the group. The unit is not enabled:
# set AUTOPUSH__ENDPOINT_URL in /etc/autopush/autopush.env first, then
# systemctl enable --now autopush.
set -e
case "$1" in
abort-*) exit 0 ;;
esac
if ! getent group autopush >/dev/null; then
	groupadd --system autopush
fi
if ! getent passwd autopush >/dev/null; then
	useradd --system --gid autopush --home-dir /var/lib/autopush --no-create-home \
		--shell /usr/sbin/nologin --comment "autopush push server" autopush
fi
install -d -m 0700 -o autopush -g autopush /var/lib/autopush
chgrp autopush /etc/autopush/autopush.env
chmod 0640 /etc/autopush/autopush.env
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload || true
	# An upgrade restarts a running server on the new binary.
	systemctl try-restart autopush.service || true
fi
exit 0
