package stack_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"testing"
)

// maxFuncLines bounds a function on the WebPush path: a reader follows a
// push from parse to answer one screen of steps at a time.
const maxFuncLines = 60

// pushPath are the packages a POST /wpush/... request runs through on
// the API tier, each with why. Bridged pushes go on into the sender
// (sender, sender/bridge): a tier of its own, with its own promises.
// internal/protocol lends the push its Notification type only; its
// decoders are the connection tier's.
var pushPath = map[string]string{
	"apitier":               "the handler (wpush.go), its routers (router.go, bridged.go) and the request wrapper (server.go)",
	"apitier/httpapi":       "reads the push's body and writes its errno answers",
	"apitier/pushheader":    "the TTL, Topic, Urgency and content-coding headers",
	"apitier/routecache":    "the cached route a push tries before storage",
	"apitier/receipts":      "the Push-Receipt header's subscription",
	"apitier/tracking":      "a tracked push's fate",
	"internal/vapid":        "the Authorization (and Crypto-Key) header",
	"internal/token":        "the endpoint token and the message id",
	"internal/nodeapi":      "the PUT /push and /notif calls to the connection node",
	"internal/notification": "the stored message a push becomes",
	"internal/owedcheck":    "the storage check owed when the router record cannot be re-read",
	"internal/errno":        "the errno table every refusal answers from",
}

// TestPushPathFuncLength fails naming every function of the push path's
// packages (their non-test files) of maxFuncLines lines or more, from
// "func" to its closing brace.
func TestPushPathFuncLength(t *testing.T) {
	g := graph(t)
	fset := token.NewFileSet()
	for pkg, why := range pushPath {
		info, ok := g[pkg]
		if !ok || len(info.files) == 0 {
			t.Errorf("%s (%s) is not a package of the module: update pushPath", pkg, why)
			continue
		}
		for _, file := range info.files {
			f, err := parser.ParseFile(fset, file, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range f.Decls {
				fd, ok := d.(*ast.FuncDecl)
				if !ok {
					continue
				}
				start, end := fset.Position(fd.Pos()), fset.Position(fd.End())
				if n := end.Line - start.Line + 1; n >= maxFuncLines {
					t.Errorf("%s/%s:%d: %s is %d lines, %d or more: split it into named steps",
						pkg, filepath.Base(file), start.Line, funcName(fd), n, maxFuncLines)
				}
			}
		}
	}
}

// funcName is fd's name, with its receiver's type for a method.
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	typ := fd.Recv.List[0].Type
	if star, ok := typ.(*ast.StarExpr); ok {
		typ = star.X
	}
	if idx, ok := typ.(*ast.IndexExpr); ok {
		typ = idx.X
	}
	if id, ok := typ.(*ast.Ident); ok {
		return id.Name + "." + fd.Name.Name
	}
	return fd.Name.Name
}
