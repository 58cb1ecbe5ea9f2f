// Package pushapi is the outbound sender's HTTP API, for application
// back-ends (docs/sender.md, docs/openapi.yaml):
//
//	POST   /push              accept a push; 201, empty body, Location /push/{id}
//	GET    /push/{id}         its state and attempt log
//	GET    /push?state=S      page through the client's pushes in state S
//	GET    /push?pushKey=K    page through the client's pushes to key K, newest first
//	DELETE /push/{id}         cancel a push that has not reached its provider
//
// Every call needs "Authorization: Bearer <key>", a client's key
// (apitier/pushapi/clients: push-clients-file and push-api-keys; none
// configured closes the API, 401), with the scope of the route (send,
// read; admin sees every client's pushes and device tokens, masked unless
// asked). POST /push keeps each client to its quotas (sender/ratelimit's
// ClientQuota: 429, and nothing stored) and its Idempotency-Key (post.go). The body and field
// rules are the sender's (sender.Sender.Accept); the node (apitier)
// serves the routes, reads the bodies and answers the errors
// (apitier/httpapi).
//
// It must never import apitier (the node imports it), engine, or a
// provider's client (the provider contract's HideToken masks device
// tokens): the sender it is given (Service) and the store (Store, for
// the clients' indexes and keys) do the rest.
package pushapi
