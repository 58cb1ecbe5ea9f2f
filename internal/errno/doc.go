// Package errno is autopush's errno table, the one source that the API
// tier's error responses and the error-code docs (docs/errors.md, checked
// by docs/docs_test.go) both come from: each Code with its HTTP status,
// documented meaning and usual message, and HTTPError, the JSON error body
// the reference sends.
//
// It holds data and formatting only: it must never import the tiers or
// another package of this module, so that any of them can import it.
package errno
