package token

import (
	"encoding/base64"
	"encoding/binary"
	"strconv"
	"strings"

	"github.com/autopush-go/autopush/internal/errno"
	"github.com/google/uuid"
)

// Message ids name one stored push: the API tier returns
// {endpoint_url}/m/{id} as the Location of a push, DELETE /m/{id} cancels
// it, and the connection node sends it to the client as the version the
// client acks. An id is a Fernet token (CRYPTO_KEY) over one of:
//
// Reference formats (autopush-rs; read, never made here):
//
//	"01:{uaid}:{chid}:{topic}"      topic message
//	"02:{uaid}:{chid}:{timestamp}"  timestamp message; milliseconds
//
// with uaid and chid as 32 lower-case hex digits, the token padded. They
// decode to SortKey 0 (topic: delete whatever version is stored, as the
// reference does) and SortKey = timestamp × 10⁶ (a sort key in
// nanoseconds; a migration of stored messages scales theirs alike).
//
// Our format, made by MakeMessageID: binary, so it is short and cheap to
// read, and it carries the SortKey of topic messages too, so a DELETE or an
// ack never removes a newer version that replaced the one it names:
//
//	0x81 ‖ uaid (16) ‖ chid (16) ‖ SortKey (uint64 BE) ‖ topic (0..32 bytes)
//
// The first byte cannot start a reference plaintext (those begin with the
// ASCII digit '0'), so the two never collide. The token is unpadded like
// endpoint tokens; padded and unpadded ids are both read. autopush-rs
// refuses ids in our format, so message ids do not survive a rollback.
const (
	idBinary       = 0x81
	idFixedLen     = 1 + 16 + 16 + 8
	maxTopicLen    = 32
	maxRefPlainLen = 3 + 32 + 1 + 32 + 1 + maxTopicLen // longest reference "01" id
	maxIDRawLen    = overhead + maxRefPlainLen + 16 - maxRefPlainLen%16
	maxIDLen       = (maxIDRawLen + 2) / 3 * 4
	sortPerMs      = 1_000_000 // reference timestamps are ms; SortKey is ns
)

// MessageID is what a message id carries.
type MessageID struct {
	UAID, CHID [16]byte
	// Topic is set for topic messages, empty for timestamp messages.
	Topic string
	// SortKey is the stored version's sort key (nanoseconds). Required for
	// a timestamp message; 0 on a topic message means "any version".
	SortKey uint64
}

// MessageIDError is why a message id was refused. The reference answers
// every kind with 400 "Invalid message ID" and no errno.
type MessageIDError struct{ reason string }

func (e *MessageIDError) Error() string { return "token: invalid message id: " + e.reason }

// errno.HTTPError is the response the reference gives for the error.
func (e *MessageIDError) HTTPError() *errno.HTTPError {
	return errno.Unnumbered(400, "Invalid message ID")
}

// The message id errors; ErrMessageIDInput is returned by MakeMessageID.
var (
	ErrMessageIDEncoding = &MessageIDError{"not url-safe base64 of a message id"}
	ErrMessageIDDecrypt  = &MessageIDError{"does not decrypt"}
	ErrMessageIDFormat   = &MessageIDError{"unknown content"}
	ErrMessageIDInput    = &MessageIDError{"a topic is 1-32 characters of [A-Za-z0-9_-] (then '='s), and a message without one needs a SortKey"}
)

// MakeMessageID encrypts id in our format (see above).
func (k *Keys) MakeMessageID(id MessageID) (string, error) {
	if id.Topic == "" && id.SortKey == 0 || id.Topic != "" && !validTopic(id.Topic) {
		return "", ErrMessageIDInput
	}
	var plain [idFixedLen + maxTopicLen]byte
	plain[0] = idBinary
	copy(plain[1:17], id.UAID[:])
	copy(plain[17:33], id.CHID[:])
	binary.BigEndian.PutUint64(plain[33:41], id.SortKey)
	n := idFixedLen + copy(plain[idFixedLen:], id.Topic)
	sc := scratchPool.Get().(*scratch)
	defer scratchPool.Put(sc)
	raw, err := k.sealRaw(sc.raw[:0], plain[:n])
	if err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(raw), nil
}

// ParseMessageID decrypts a message id made here or by the reference.
// Errors are *MessageIDError.
func (k *Keys) ParseMessageID(s string) (MessageID, error) {
	if len(s) > maxIDLen {
		return MessageID{}, ErrMessageIDEncoding
	}
	sc := scratchPool.Get().(*scratch)
	defer scratchPool.Put(sc)
	raw, ok := decodeB64(sc.raw[:0], s)
	if !ok {
		return MessageID{}, ErrMessageIDEncoding
	}
	plain, err := k.openRaw(sc.plain[:0], raw, 0, &sc.sum)
	if err != nil {
		return MessageID{}, ErrMessageIDDecrypt
	}
	if len(plain) > 0 && plain[0] == idBinary {
		return parseBinaryID(plain)
	}
	return parseReferenceID(string(plain))
}

func parseBinaryID(p []byte) (MessageID, error) {
	if len(p) < idFixedLen || len(p) > idFixedLen+maxTopicLen {
		return MessageID{}, ErrMessageIDFormat
	}
	var id MessageID
	copy(id.UAID[:], p[1:17])
	copy(id.CHID[:], p[17:33])
	id.SortKey = binary.BigEndian.Uint64(p[33:41])
	id.Topic = string(p[idFixedLen:])
	if id.Topic == "" && id.SortKey == 0 || id.Topic != "" && !validTopic(id.Topic) {
		return MessageID{}, ErrMessageIDFormat
	}
	return id, nil
}

// parseReferenceID reads the reference's "01:..." and "02:..."
// plaintexts. Its parser splits on ':' into exactly four fields and takes
// any UUID form; the fields it minted are checked as strictly as it
// checked them on the way in (a topic as the Topic header rules).
func parseReferenceID(s string) (MessageID, error) {
	f := strings.Split(s, ":")
	if len(f) != 4 {
		return MessageID{}, ErrMessageIDFormat
	}
	var id MessageID
	u, err := uuid.Parse(f[1])
	if err != nil {
		return MessageID{}, ErrMessageIDFormat
	}
	c, err := uuid.Parse(f[2])
	if err != nil {
		return MessageID{}, ErrMessageIDFormat
	}
	id.UAID, id.CHID = u, c
	switch f[0] {
	case "01":
		if !validTopic(f[3]) {
			return MessageID{}, ErrMessageIDFormat
		}
		id.Topic = f[3]
	case "02":
		ms, err := strconv.ParseUint(f[3], 10, 64)
		if err != nil || ms == 0 || ms > ^uint64(0)/sortPerMs {
			return MessageID{}, ErrMessageIDFormat
		}
		id.SortKey = ms * sortPerMs
	default:
		return MessageID{}, ErrMessageIDFormat
	}
	return id, nil
}

// validTopic is the reference's Topic header rule: 1-32
// characters matching ^[0-9A-Za-z\-_]+=*$.
func validTopic(t string) bool {
	if len(t) == 0 || len(t) > maxTopicLen {
		return false
	}
	i := 0
	for ; i < len(t); i++ {
		c := t[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '-' || c == '_') {
			break
		}
	}
	if i == 0 {
		return false
	}
	for ; i < len(t); i++ {
		if t[i] != '=' {
			return false
		}
	}
	return true
}
