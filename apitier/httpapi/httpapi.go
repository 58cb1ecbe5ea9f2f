// Package httpapi is what the endpoint node's HTTP handlers share: the
// Exchange of a request, its body read whole, and the answers.
//
// The node (apitier) serves its own routes and those of the APIs in
// packages of their own (apitier/pushapi, apitier/registration,
// apitier/receipts, apitier/megaphone). Every handler answers its
// errors and reads its body through an Exchange, so that the node
// counts and logs every route's answers alike (errno metrics, the
// request summary line) and never drains a body nobody read; and
// answers with the helpers here (JSON bodies, errors with the headers of
// their status, 400s with errno null, a JSON decoding problem in words).
//
// It must never import apitier or an API package: they import it.
package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/cloudwego/hertz/pkg/app"

	"github.com/autopush-go/autopush/internal/errno"
)

// Handler serves one route: it answers through c (and x for errors).
type Handler func(ctx context.Context, c *app.RequestContext, x *Exchange)

// Route is one route of an API: method and path pattern in Hertz's
// syntax (":name" is a path parameter), the route label of the node's
// request metrics (autoendpoint_requests_total{route}), and its handler.
type Route struct {
	Method, Path string
	Label        string
	Handle       Handler
}

// WriteJSON answers code with v as JSON (a 500 {"status":"error"} if v
// does not marshal).
func WriteJSON(c *app.RequestContext, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		code, b = http.StatusInternalServerError, []byte(`{"status":"error"}`)
	}
	c.Data(code, "application/json", b)
}

// BadRequest is a 400 with errno null: a field the reference's errno
// table has no number for.
func BadRequest(msg string) *errno.HTTPError {
	return errno.Unnumbered(http.StatusBadRequest, msg)
}

// JSONProblem names what is wrong with a JSON body (a decoding error of
// encoding/json) without echoing the decoder's Go types.
func JSONProblem(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field == "" {
			return "the body must be a JSON object"
		}
		return te.Field + " must be a string"
	}
	msg := err.Error()
	if strings.HasPrefix(msg, "json: unknown field ") {
		return "unknown field " + strings.TrimPrefix(msg, "json: unknown field ")
	}
	return msg
}

// DecodeObject decodes body, one JSON object and nothing after it, into
// v; with closed, a member v has no field for is refused too. Any other
// JSON value (null included, which encoding/json would take as "no
// members") is refused. The error says in words what is wrong.
func DecodeObject(body []byte, v any, closed bool) error {
	body = bytes.TrimLeft(body, " \t\r\n")
	switch {
	case len(body) == 0:
		return errors.New("the body is empty")
	case body[0] != '{':
		return errors.New("the body must be a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if closed {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		return errors.New(JSONProblem(err))
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("more than one value")
	}
	return nil
}

// KnownQuery refuses (400, naming it) a query parameter that is not one
// of names. A route that reads query parameters calls it, so that a
// misspelt one ("?limt=5") is not ignored silently, answering something
// the client did not ask for; a route that reads none ignores the query
// string, as the reference does.
func KnownQuery(c *app.RequestContext, names ...string) *errno.HTTPError {
	unknown, found := "", false
	c.QueryArgs().VisitAll(func(k, _ []byte) {
		if !found && !slices.Contains(names, string(k)) {
			unknown, found = string(k), true
		}
	})
	if !found {
		return nil
	}
	return BadRequest("unknown query parameter " + strconv.Quote(unknown) + ": this route takes " + strings.Join(names, ", "))
}
