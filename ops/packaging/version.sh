#!/usr/bin/env bash
# Prints the version make dist stamps into the binaries and packages: the
# nearest v* tag as git describe gives it, without the v (1.2.3, or
# 1.2.3-4-gabcdef1 past it), else Go's pseudo-version form of the commit
# (0.0.0-20261207053521-5bea7e4c52ed); "+dirty" when the work tree has
# changes. Both sort as Debian and RPM versions do (newer is greater).
set -euo pipefail
cd "$(dirname "$0")/../.."
if v=$(git describe --tags --match 'v[0-9]*' 2>/dev/null); then
	v=${v#v}
else
	v="0.0.0-$(TZ=UTC git log -1 --format=%cd --date=format-local:%Y%m%d%H%M%S)-$(git rev-parse --short=12 HEAD)"
fi
if [ -n "$(git status --porcelain)" ]; then
	v+="+dirty"
fi
echo "$v"
