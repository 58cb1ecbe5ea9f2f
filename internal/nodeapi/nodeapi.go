package nodeapi

import "net/http"

// Routes as http.ServeMux patterns.
const (
	RoutePush  = "PUT /push/{uaid}"
	RouteNotif = "PUT /notif/{uaid}"
	RouteDrop  = "DELETE /notif/{uaid}/{connected_at}"
)

// Statuses and what each means to the caller.
const (
	// StatusDelivered (PUT /push): written to the client's socket; the
	// caller stores nothing.
	StatusDelivered = http.StatusOK
	// StatusBusy (PUT /push): the client is there but busy (notifications
	// unacked, its hello running, the node draining); the caller stores
	// the message, and the node owes the client a storage check.
	StatusBusy = http.StatusServiceUnavailable
	// StatusNotHere (all routes): no such client on this node; for a push
	// the caller clears the router record's node_id (if connected_at still
	// matches) and stores the message.
	StatusNotHere = http.StatusNotFound
	// StatusStale (PUT /push?connected_at=): the client's connection is
	// not the one named, or it unsubscribed a channel since it connected:
	// nothing was delivered, and a caller that named the connection from
	// a cached router record reads storage and routes the push again.
	StatusStale = http.StatusConflict
	// StatusChecking (PUT /notif): the node is reading storage now.
	StatusChecking = http.StatusOK
	// StatusCheckLater (PUT /notif): the node reads storage once what is
	// in flight has drained.
	StatusCheckLater = http.StatusAccepted
	// StatusDropped (DELETE /notif): the older connection was closed.
	StatusDropped = http.StatusOK
)

// Answers lists every status each route answers: the statuses above, and
// 400 (a malformed uaid, connected_at or body), 401 (no or a wrong node
// secret), 408 (a body slower than the body timeout) and 413 (a body over
// its bound). docs/nodeapi.yaml documents exactly these.
var Answers = map[string][]int{
	RoutePush: {StatusDelivered, http.StatusBadRequest, http.StatusUnauthorized, StatusNotHere, StatusStale,
		http.StatusRequestTimeout, http.StatusRequestEntityTooLarge, StatusBusy},
	RouteNotif: {StatusChecking, StatusCheckLater, http.StatusBadRequest, http.StatusUnauthorized, StatusNotHere},
	RouteDrop:  {StatusDropped, http.StatusBadRequest, http.StatusUnauthorized, StatusNotHere},
}

// Call names a route for metrics and logs.
type Call uint8

// The calls.
const (
	CallPush Call = iota
	CallNotif
	CallDrop
)

func (c Call) String() string {
	switch c {
	case CallPush:
		return "push"
	case CallNotif:
		return "notif"
	}
	return "drop"
}
