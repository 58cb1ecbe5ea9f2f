package nodeapi

import "github.com/autopush-go/autopush/internal/webpush"

// AppendNotification appends n as the PUT /push body.
func AppendNotification(dst []byte, n *webpush.Notification) []byte {
	return webpush.AppendNotificationJSON(dst, n)
}

// DecodeNotification decodes a PUT /push body into n; n's strings point
// into buf.
func DecodeNotification(buf []byte, n *webpush.Notification) error {
	return webpush.DecodeNotification(buf, n)
}
