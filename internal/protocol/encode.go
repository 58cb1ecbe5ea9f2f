package protocol

// Server messages, appended to a caller's buffer so that a connection node
// can write a frame without allocating. Key order follows autopush-rs
// (serde emits the messageType tag first, then fields in declaration order);
// clients do not depend on it, but byte-identical output keeps comparisons
// with the reference simple.

import (
	"encoding/hex"
	"strconv"

	"github.com/autopush-go/autopush/internal/jsonscan"
)

// AppendHelloReply appends the reply to hello:
//
//	{"messageType":"hello","uaid":"<32 hex>","status":200,"use_webpush":true,"broadcasts":{...}}
//
// broadcasts is the object AppendBroadcast describes; it is always present,
// {} when both lists are empty.
func AppendHelloReply(dst []byte, uaid [16]byte, status int, changed, errs []Broadcast) []byte {
	dst = append(dst, `{"messageType":"hello","uaid":"`...)
	dst = AppendUAID(dst, uaid)
	dst = append(dst, `","status":`...)
	dst = strconv.AppendInt(dst, int64(status), 10)
	dst = append(dst, `,"use_webpush":true,"broadcasts":`...)
	dst = appendBroadcasts(dst, changed, errs)
	return append(dst, '}')
}

// AppendRegisterReply appends the reply to register:
//
//	{"messageType":"register","channelID":"...","status":200,"pushEndpoint":"https://..."}
//
// pushEndpoint is left out when endpoint is "" (error replies).
func AppendRegisterReply(dst []byte, channelID string, status int, endpoint string) []byte {
	dst = append(dst, `{"messageType":"register","channelID":`...)
	dst = jsonscan.AppendString(dst, channelID)
	dst = append(dst, `,"status":`...)
	dst = strconv.AppendInt(dst, int64(status), 10)
	if endpoint != "" {
		dst = append(dst, `,"pushEndpoint":`...)
		dst = jsonscan.AppendString(dst, endpoint)
	}
	return append(dst, '}')
}

// AppendUnregisterReply appends the reply to unregister:
//
//	{"messageType":"unregister","channelID":"...","status":200}
func AppendUnregisterReply(dst []byte, channelID string, status int) []byte {
	dst = append(dst, `{"messageType":"unregister","channelID":`...)
	dst = jsonscan.AppendString(dst, channelID)
	dst = append(dst, `,"status":`...)
	dst = strconv.AppendInt(dst, int64(status), 10)
	return append(dst, '}')
}

// AppendPingReply appends the reply to ping, {} (what autopush sends and
// what Firefox sends, although both accept {"messageType":"ping"}).
func AppendPingReply(dst []byte) []byte { return append(dst, '{', '}') }

// AppendNotification appends a push to the client:
//
//	{"messageType":"notification","channelID":"...","version":"...","data":"...","headers":{"encoding":"aes128gcm"}}
//
// data and headers are left out when n.Data is "" (a push without payload),
// headers also when n.Headers is empty. TTL, topic, timestamp and sort key
// are not sent: autopush-rs does not send them and Firefox ignores them.
// n.Tracked is not looked at: a tracked push is AppendTrackedNotification's.
func AppendNotification(dst []byte, n *Notification) []byte {
	return append(appendNotificationFields(dst, n), '}')
}

// AppendTrackedNotification appends a tracked push to the client:
// AppendNotification's message with one more member last,
//
//	,"reliability_id":"<32 hex digits of id>"
//
// as autopush-rs adds to a push it tracks. id is the push's fate id
// (storage.NewFateID of its version), the one its receipt's id ends with
// (docs/receipts.md).
func AppendTrackedNotification(dst []byte, n *Notification, id [16]byte) []byte {
	dst = appendNotificationFields(dst, n)
	dst = append(dst, `,"reliability_id":"`...)
	dst = hex.AppendEncode(dst, id[:])
	return append(dst, '"', '}')
}

// appendNotificationFields is a notification message but its closing brace.
func appendNotificationFields(dst []byte, n *Notification) []byte {
	dst = append(dst, `{"messageType":"notification","channelID":`...)
	dst = jsonscan.AppendString(dst, n.ChannelID)
	dst = append(dst, `,"version":`...)
	dst = jsonscan.AppendString(dst, n.Version)
	return AppendPayload(dst, n)
}

// AppendBroadcast appends a broadcast (megaphone) update to the client:
//
//	{"messageType":"broadcast","broadcasts":{"<id>":"<version>",...,"errors":{"<id>":"Broadcast not found"}}}
//
// changed lists ids with their new versions; errs lists ids the server does
// not know, with the error text as Version (BroadcastNotFound), under
// "errors", which is left out when errs is empty. Ids must be unique.
func AppendBroadcast(dst []byte, changed, errs []Broadcast) []byte {
	dst = append(dst, `{"messageType":"broadcast","broadcasts":`...)
	dst = appendBroadcasts(dst, changed, errs)
	return append(dst, '}')
}

// AppendPayload appends n's data and headers members,
// ,"data":"...","headers":{...}, when n has data (headers only when there
// are some). The "notification" message ends with them, and so does the
// internal node API's body (nodeapi.AppendNotification), as in autopush-rs.
func AppendPayload(dst []byte, n *Notification) []byte {
	if n.Data == "" {
		return dst
	}
	dst = append(dst, `,"data":`...)
	dst = jsonscan.AppendString(dst, n.Data)
	if len(n.Headers) == 0 {
		return dst
	}
	dst = append(dst, `,"headers":{`...)
	for i, h := range n.Headers {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = jsonscan.AppendString(dst, h.Name)
		dst = append(dst, ':')
		dst = jsonscan.AppendString(dst, h.Value)
	}
	return append(dst, '}')
}

func appendBroadcasts(dst []byte, changed, errs []Broadcast) []byte {
	dst = append(dst, '{')
	dst = appendPairs(dst, changed)
	if len(errs) > 0 {
		if len(changed) > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `"errors":{`...)
		dst = appendPairs(dst, errs)
		dst = append(dst, '}')
	}
	return append(dst, '}')
}

func appendPairs(dst []byte, bs []Broadcast) []byte {
	for i, b := range bs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = jsonscan.AppendString(dst, b.ID)
		dst = append(dst, ':')
		dst = jsonscan.AppendString(dst, b.Version)
	}
	return dst
}
