// Package buildinfo names the build a binary came from, from what the Go
// toolchain embeds in it (runtime/debug.ReadBuildInfo): the main module's
// version, and the VCS revision, its time and whether the work tree had
// uncommitted changes. `go build` in a git checkout records them, so a
// source build names its commit with no flags; `make dist` stamps the
// release version (git describe) on top with -ldflags -X.
//
// It must never import anything of this module: every binary uses it.
package buildinfo
