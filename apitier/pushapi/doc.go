// Package pushapi is the outbound sender's HTTP API, for application
// back-ends (docs/sender.md, docs/openapi.yaml):
//
//	POST /push             accept a push; 201, empty body, Location /push/{id}
//	GET  /push/{id}        its state and attempt log
//	GET  /push?state=S     page through the pushes in state S (cursor, limit)
//
// Every call needs "Authorization: Bearer <key>" with one of
// push-api-keys (compared in constant time); none configured closes the
// API (401). The body and field rules are the sender's
// (sender.Sender.Accept); the node (apitier) serves the routes, reads the
// bodies and answers the errors (apitier/httpapi).
//
// It must never import apitier (the node imports it), engine, or a
// provider: the sender it is given (Service) does the rest.
package pushapi
