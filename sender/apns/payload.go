package apns

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/autopush-go/autopush/sender/bridge/aps"
	"github.com/autopush-go/autopush/sender/provider"
)

// ErrPayloadTooLarge is a notification whose APNs payload is over
// apns-max-data: the API tier answers 413 before queueing it.
var ErrPayloadTooLarge = errors.New("apns: payload too large")

// Payload is the JSON body sent for n: {"aps": ...} (derived from the
// registration's "aps" in n.Data[aps.DataKey], the default block when there
// is none or it cannot be derived) and n.Data's other fields at the top
// level (chid; and with a body: body, con, and for aesgcm enc and
// cryptokey), plus "ver", the message id, from n.Data or else n.ID.
// Keys are sorted, so the bytes are the same for the same notification.
func Payload(n *provider.Notification) []byte {
	b, _ := payload(n)
	return b
}

// payload is Payload, and aps.ErrInvalid when the registration's "aps"
// could not be derived (the bytes then carry the default block).
func payload(n *provider.Notification) ([]byte, error) {
	m := make(map[string]any, len(n.Data)+2)
	for k, v := range n.Data {
		m[k] = v
	}
	if _, ok := n.Data["ver"]; !ok && n.ID != "" {
		m["ver"] = n.ID
	}
	block, err := aps.Derive(n.Data[aps.DataKey])
	m["aps"] = block
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	// A map of strings and a fixed struct always encodes.
	_ = enc.Encode(m)
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), err
}

// PayloadSize is the size in bytes of n's APNs payload.
func PayloadSize(n *provider.Notification) int { return len(Payload(n)) }

// CheckData reports (ErrPayloadTooLarge) a notification whose payload is
// over apns-max-data, and by how much.
func (c *Config) CheckData(n *provider.Notification) error {
	if size := PayloadSize(n); size > c.MaxData {
		return fmt.Errorf("%w: %d bytes, %d over apns-max-data %d", ErrPayloadTooLarge, size, size-c.MaxData, c.MaxData)
	}
	return nil
}

// maxCollapseID is Apple's limit on apns-collapse-id.
const maxCollapseID = 64

// CollapseID is the apns-collapse-id sent for a collapse key: the key
// itself when it fits Apple's 64 bytes and is printable ASCII (a header
// value), else the hex SHA-256 of it (64 bytes), so that two keys
// collapse together exactly when they are equal. A WebPush Topic (at
// most 32 base64url characters) and a push id (a UUID) are always sent
// as they are.
func CollapseID(key string) string {
	if len(key) <= maxCollapseID && printable(key) {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}
