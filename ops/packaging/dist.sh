#!/usr/bin/env bash
# make dist: static binaries (CGO_ENABLED=0, -trimpath) for each of
# DIST_ARCHS into dist/linux_$ARCH, stamped with VERSION and the commit
# (internal/buildinfo), and the .deb and .rpm of ops/packaging/nfpm.yaml
# for each into dist/. nfpm is pinned and run through the Go module proxy.
#
#   VERSION=1.2.3 DIST_ARCHS="amd64 arm64" ops/packaging/dist.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
NFPM=github.com/goreleaser/nfpm/v2/cmd/nfpm@v2.48.0
export VERSION=${VERSION:-$(bash ops/packaging/version.sh)}
archs=${DIST_ARCHS:-amd64 arm64}
cmds=(./stack/cmd/autopush ./engine/cmd/autoconnect ./apitier/cmd/autoendpoint ./sender/cmd/autosender
	./tools/cmd/autokey ./tools/cmd/cqlschema ./tools/cmd/endpointdiag ./tools/cmd/pushsend ./tools/cmd/pushclient)

# What Go records by itself only in a clone (not in a git worktree, nor
# under GOFLAGS=-buildvcs=false), stamped so that every build says it.
pkg=github.com/autopush-go/autopush/internal/buildinfo
ldflags="-s -w -X $pkg.Version=$VERSION"
if rev=$(git rev-parse HEAD 2>/dev/null); then
	modified=false
	[ -z "$(git status --porcelain)" ] || modified=true
	ldflags+=" -X $pkg.Revision=$rev -X $pkg.Modified=$modified"
	ldflags+=" -X $pkg.Time=$(TZ=UTC git log -1 --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ)"
fi

rm -rf dist
for arch in $archs; do
	out=dist/linux_$arch
	echo "== $out: ${cmds[*]##*/} ($VERSION)" >&2
	mkdir -p "$out"
	CGO_ENABLED=0 GOOS=linux GOARCH=$arch go build -trimpath -buildvcs=auto -ldflags="$ldflags" -o "$out/" "${cmds[@]}"
	rm -rf dist/.pkg
	cp -r "$out" dist/.pkg
	for packager in deb rpm; do
		ARCH=$arch go run "$NFPM" package --config ops/packaging/nfpm.yaml --packager "$packager" --target dist/
	done
done
rm -rf dist/.pkg
ls -l dist/*.deb dist/*.rpm dist/linux_*/* >&2
