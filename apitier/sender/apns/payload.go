package apns

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/autopush-go/autopush/apitier/sender/provider"
)

// ErrPayloadTooLarge is a notification whose APNs payload is over
// apns-max-data: the API tier answers 413 before queueing it.
var ErrPayloadTooLarge = errors.New("apns: payload too large")

// aps is the fixed "aps" block: a mutable-content alert whose
// localisation keys Firefox for iOS's notification extension replaces
// with the decrypted message (or its "no tab arriving" fallback).
type aps struct {
	Alert          alert `json:"alert"`
	MutableContent int   `json:"mutable-content"`
}

type alert struct {
	LocKey      string `json:"loc-key"`
	TitleLocKey string `json:"title-loc-key"`
}

var defaultAPS = aps{
	Alert: alert{
		LocKey:      "SentTab.NoTabArrivingNotification.body",
		TitleLocKey: "SentTab.NoTabArrivingNotification.title",
	},
	MutableContent: 1,
}

// Payload is the JSON body sent for n: {"aps": ...} and n.Data's fields
// at the top level (chid; and with a body: body, con, and for aesgcm enc
// and cryptokey), plus "ver", the message id, from n.Data or else n.ID.
// A Data key "aps" is ignored (the block is ours). Keys are sorted, so
// the bytes are the same for the same notification.
func Payload(n *provider.Notification) []byte {
	m := make(map[string]any, len(n.Data)+2)
	for k, v := range n.Data {
		m[k] = v
	}
	if _, ok := n.Data["ver"]; !ok && n.ID != "" {
		m["ver"] = n.ID
	}
	m["aps"] = defaultAPS
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	// A map of strings and a fixed struct always encodes.
	_ = enc.Encode(m)
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
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
// most 32 base64url characters) is always sent as it is.
func CollapseID(key string) string {
	if len(key) <= maxCollapseID && printable(key) {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}
