package embedded

import (
	"encoding/binary"
	"errors"
	"maps"
	"slices"

	"github.com/autopush-go/autopush/storage"
)

// Records are stored in a small versioned binary format: cheaper than JSON
// on the hot path, and a format byte leaves room to change it.
const codecVersion = 1

// Messages are at version 2: version 1 plus a flags byte (msgTracked).
// Version 1 records, written before messages could be tracked, still
// decode, as untracked.
const (
	messageCodec = 2
	msgTracked   = 0x01
)

var errCorrupt = errors.New("embedded: corrupt record")

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendMap(b []byte, m map[string]string) []byte {
	b = binary.AppendUvarint(b, uint64(len(m)))
	// Sorted so that equal maps encode to equal bytes.
	for _, k := range slices.Sorted(maps.Keys(m)) {
		b = appendString(appendString(b, k), m[k])
	}
	return b
}

// reader decodes what the append functions wrote; the first error sticks.
type reader struct {
	b   []byte
	err error
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errCorrupt
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err = errCorrupt
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) bytes(n uint64) []byte {
	if r.err != nil || n > uint64(len(r.b)) {
		r.err = errCorrupt
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

func (r *reader) uint64() uint64 {
	if b := r.bytes(8); b != nil {
		return binary.BigEndian.Uint64(b)
	}
	return 0
}

func (r *reader) string() string { return string(r.bytes(r.uvarint())) }

func (r *reader) strmap() map[string]string {
	n := r.uvarint()
	// Each entry takes at least two bytes: refuse counts the input
	// cannot hold before allocating for them.
	if r.err != nil || n > uint64(len(r.b))/2 {
		r.err = errCorrupt
		return nil
	}
	if n == 0 {
		return nil
	}
	m := make(map[string]string, n)
	for range n {
		k := r.string()
		m[k] = r.string()
	}
	return m
}

func (r *reader) done() error {
	if r.err == nil && len(r.b) != 0 {
		r.err = errCorrupt
	}
	return r.err
}

// record is a user record plus the expiry it was indexed under.
type record struct {
	storage.User
	ExpiresAt int64 // ns since the Unix epoch
}

func encodeUser(rec *record) []byte {
	b := []byte{codecVersion}
	b = appendString(b, rec.RouterType)
	b = appendMap(b, rec.RouterData)
	b = appendString(b, rec.NodeID)
	b = binary.AppendVarint(b, rec.ConnectedAt)
	b = binary.AppendVarint(b, rec.LastConnect)
	b = binary.AppendUvarint(b, rec.Cursor)
	return binary.AppendVarint(b, rec.ExpiresAt)
}

func decodeUser(b []byte) (record, error) {
	var rec record
	if len(b) == 0 || b[0] != codecVersion {
		return rec, errCorrupt
	}
	r := reader{b: b[1:]}
	rec.RouterType = r.string()
	rec.RouterData = r.strmap()
	rec.NodeID = r.string()
	rec.ConnectedAt = r.varint()
	rec.LastConnect = r.varint()
	rec.Cursor = r.uvarint()
	rec.ExpiresAt = r.varint()
	return rec, r.done()
}

func encodeMessage(m *storage.Message) []byte {
	b := make([]byte, 0, 64+len(m.Data)+len(m.Version))
	b = append(b, messageCodec)
	b = append(b, m.CHID[:]...)
	b = binary.BigEndian.AppendUint64(b, m.SortKey)
	b = binary.AppendVarint(b, m.TTL)
	b = appendString(b, m.Version)
	b = appendString(b, m.Topic)
	b = appendString(b, m.Data)
	b = appendMap(b, m.Headers)
	var flags byte
	if m.Tracked {
		flags |= msgTracked
	}
	return append(b, flags)
}

func decodeMessage(b []byte) (storage.Message, error) {
	var m storage.Message
	if len(b) == 0 || b[0] != codecVersion && b[0] != messageCodec {
		return m, errCorrupt
	}
	r := reader{b: b[1:]}
	copy(m.CHID[:], r.bytes(16))
	m.SortKey = r.uint64()
	m.TTL = r.varint()
	m.Version = r.string()
	m.Topic = r.string()
	m.Data = r.string()
	m.Headers = r.strmap()
	if b[0] == messageCodec {
		flags := r.bytes(1)
		// Unknown flags are corrupt, so that a decoded record encodes back
		// to the same bytes.
		if flags != nil && flags[0]&^msgTracked != 0 {
			r.err = errCorrupt
		}
		m.Tracked = flags != nil && flags[0]&msgTracked != 0
	}
	return m, r.done()
}
