//go:build tools

// Package tools holds the operator and developer tools (see README.md).
//
// This file pins, in go.mod, the libraries the tiers are built on before
// the code that imports them lands, so every issue builds on the versions
// the project chose (some modules cannot be resolved with @latest from the
// module proxy here). It is never compiled.
package tools

import (
	_ "github.com/VictoriaMetrics/metrics"
	_ "github.com/cloudwego/hertz/pkg/app/server"
	_ "github.com/gobwas/ws"
	_ "github.com/panjf2000/gnet/v2"
)
