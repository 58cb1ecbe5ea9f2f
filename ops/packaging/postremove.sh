#!/bin/sh
# After removal: systemd forgets the unit. The autopush user and
# /var/lib/autopush stay, purge included: the directory holds the store
# and the crypto-key that every endpoint handed out depends on. Delete
# them by hand (userdel autopush; rm -r /var/lib/autopush) when done.
set -e
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload || true
fi
exit 0
