package nodeapi

import (
	"github.com/autopush-go/autopush/internal/protocol"
)

// AppendNotification appends n as the PUT /push body.
func AppendNotification(dst []byte, n *protocol.Notification) []byte {
	return protocol.AppendNotificationJSON(dst, n)
}

// DecodeNotification decodes a PUT /push body into n; n's strings point
// into buf.
func DecodeNotification(buf []byte, n *protocol.Notification) error {
	return protocol.DecodeNotification(buf, n)
}
