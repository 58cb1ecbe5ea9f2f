// Package nodeapi is the one home of the connection nodes' internal HTTP
// API, which endpoint nodes deliver through and connection nodes call each
// other on:
//
//	PUT    /push/{uaid}                 deliver now: 200 written to the
//	                                    client's socket, 404 not connected
//	                                    here, 503 busy (store and notify)
//	PUT    /notif/{uaid}                check storage: 200 checking, 202
//	                                    busy (will check when acks drain),
//	                                    404 not here
//	DELETE /notif/{uaid}/{connected_at} drop a connection at least as old
//	                                    as connected_at: 200 closed, 404
//
// It holds the routes and what each status means, the notification body
// of PUT /push and its codec, the Client both tiers call nodes with, and
// the server side (Routes) a connection node mounts on its internal
// listener. Converting a notification to a stored message and back is
// internal/notification's.
// docs/nodeapi.yaml documents the same contract and is checked against it.
//
// Callers authenticate with "Authorization: Bearer <node secret>"; with no
// secret configured every call is refused. A shared secret,
// not an allow-list, because endpoint nodes scale and move while the
// secret stays in the deployment's configuration.
//
// It must never import a tier (engine, apitier): both import it.
package nodeapi
