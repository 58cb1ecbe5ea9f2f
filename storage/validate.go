package storage

import (
	"fmt"

	"github.com/google/uuid"
)

// The Validate functions are shared by every backend so that all of them
// reject the same input with the same error before touching disk or
// network.

// ValidateUAID rejects the nil UUID.
func ValidateUAID(uaid uuid.UUID) error {
	if uaid == uuid.Nil {
		return fmt.Errorf("uaid is the nil UUID: %w", ErrInvalid)
	}
	return nil
}

// ValidateChannel rejects a nil uaid or chid.
func ValidateChannel(uaid, chid uuid.UUID) error {
	if err := ValidateUAID(uaid); err != nil {
		return err
	}
	if chid == uuid.Nil {
		return fmt.Errorf("channel id is the nil UUID: %w", ErrInvalid)
	}
	return nil
}

// ValidateUser checks a record passed to Connect.
func ValidateUser(u *User) error {
	if err := ValidateUAID(u.UAID); err != nil {
		return err
	}
	if u.ConnectedAt <= 0 {
		return fmt.Errorf("connected_at %d is not a positive millisecond time: %w", u.ConnectedAt, ErrInvalid)
	}
	if !isToken(u.RouterType, 32) {
		return fmt.Errorf("router_type %q is not 1-32 of [a-z0-9_]: %w", u.RouterType, ErrInvalid)
	}
	if len(u.NodeID) > MaxNodeIDLen {
		return fmt.Errorf("node_id is %d bytes, over %d: %w", len(u.NodeID), MaxNodeIDLen, ErrInvalid)
	}
	n := 0
	for k, v := range u.RouterData {
		n += len(k) + len(v)
	}
	if n > MaxRouterData {
		return fmt.Errorf("router_data is %d bytes, over %d: %w", n, MaxRouterData, ErrInvalid)
	}
	return nil
}

// ValidateMessage checks a message passed to SaveMessage.
func ValidateMessage(uaid uuid.UUID, m *Message) error {
	if err := ValidateChannel(uaid, m.CHID); err != nil {
		return err
	}
	if m.SortKey == 0 {
		return fmt.Errorf("sort key is zero: %w", ErrInvalid)
	}
	if m.TTL <= 0 || m.TTL > MaxTTL {
		return fmt.Errorf("ttl %d is outside 1..%d seconds: %w", m.TTL, MaxTTL, ErrInvalid)
	}
	if m.Version == "" || len(m.Version) > MaxVersionLen {
		return fmt.Errorf("version is %d bytes, want 1..%d: %w", len(m.Version), MaxVersionLen, ErrInvalid)
	}
	if err := ValidateTopic(m.Topic); err != nil {
		return err
	}
	if len(m.Data) > MaxDataLen {
		return fmt.Errorf("data is %d bytes, over %d: %w", len(m.Data), MaxDataLen, ErrInvalid)
	}
	if !isBase64URL(m.Data) {
		return fmt.Errorf("data is not unpadded base64url: %w", ErrInvalid)
	}
	if len(m.Headers) > MaxHeaders {
		return fmt.Errorf("%d headers, over %d: %w", len(m.Headers), MaxHeaders, ErrInvalid)
	}
	n := 0
	for k, v := range m.Headers {
		if k == "" {
			return fmt.Errorf("empty header name: %w", ErrInvalid)
		}
		n += len(k) + len(v)
	}
	if n > MaxHeaderBytes {
		return fmt.Errorf("headers are %d bytes, over %d: %w", n, MaxHeaderBytes, ErrInvalid)
	}
	return nil
}

// ValidateTopic accepts "" (no topic) or up to MaxTopicLen base64url
// characters (RFC 8030 §5.4).
func ValidateTopic(topic string) error {
	if len(topic) > MaxTopicLen || !isBase64URL(topic) {
		return fmt.Errorf("topic %q is not up to %d base64url characters: %w", topic, MaxTopicLen, ErrInvalid)
	}
	return nil
}

// ValidateKey checks a key passed to DeleteMessage.
func ValidateKey(uaid uuid.UUID, k MessageKey) error {
	if err := ValidateChannel(uaid, k.CHID); err != nil {
		return err
	}
	if err := ValidateTopic(k.Topic); err != nil {
		return err
	}
	if k.Topic == "" && k.SortKey == 0 {
		return fmt.Errorf("timestamp message key without sort key: %w", ErrInvalid)
	}
	return nil
}

// ValidateLimit checks a page size.
func ValidateLimit(limit int) error {
	if limit <= 0 || limit > MaxFetchLimit {
		return fmt.Errorf("limit %d is outside 1..%d: %w", limit, MaxFetchLimit, ErrInvalid)
	}
	return nil
}

func isBase64URL(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

func isToken(s string, max int) bool {
	if s == "" || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}
