package embedded

import (
	"encoding/binary"

	"github.com/google/uuid"
)

// Key layout (all integers big-endian so that byte order is numeric order):
//
//	'r' uaid                          -> user record
//	'c' uaid chid                     -> channel (empty value)
//	'm' uaid 0x01 chid topic          -> topic message
//	'm' uaid 0x02 sortkey chid        -> timestamp message
//	'x' expiry(ns) key                -> expiry index entry (empty value)
//	'b' broadcast id                  -> broadcast version (broadcasts.go)
//
// One user's channels and messages are contiguous, so listing, paging and
// dropping a user are range operations.
const (
	prefixUser    = 'r'
	prefixChannel = 'c'
	prefixMessage = 'm'
	prefixExpiry  = 'x'

	kindTopic     = 0x01
	kindTimestamp = 0x02
)

func userKey(uaid uuid.UUID) []byte {
	return append([]byte{prefixUser}, uaid[:]...)
}

func channelPrefix(uaid uuid.UUID) []byte {
	return append([]byte{prefixChannel}, uaid[:]...)
}

func channelKey(uaid, chid uuid.UUID) []byte {
	return append(channelPrefix(uaid), chid[:]...)
}

func messagePrefix(uaid uuid.UUID, kind byte) []byte {
	return append([]byte{prefixMessage}, append(uaid[:], kind)...)
}

func topicKey(uaid, chid uuid.UUID, topic string) []byte {
	k := messagePrefix(uaid, kindTopic)
	k = append(k, chid[:]...)
	return append(k, topic...)
}

func timestampKey(uaid uuid.UUID, sortKey uint64, chid uuid.UUID) []byte {
	k := binary.BigEndian.AppendUint64(messagePrefix(uaid, kindTimestamp), sortKey)
	return append(k, chid[:]...)
}

func expiryKey(expiresAt int64, key []byte) []byte {
	k := binary.BigEndian.AppendUint64([]byte{prefixExpiry}, uint64(expiresAt))
	return append(k, key...)
}

// splitExpiry returns the expiry time and the key an index entry points at.
func splitExpiry(k []byte) (int64, []byte, bool) {
	if len(k) < 1+8+1 || k[0] != prefixExpiry {
		return 0, nil, false
	}
	return int64(binary.BigEndian.Uint64(k[1:9])), k[9:], true
}

// uaidOf returns the user a user or message key belongs to.
func uaidOf(key []byte) (uuid.UUID, bool) {
	var u uuid.UUID
	if len(key) < 17 {
		return u, false
	}
	copy(u[:], key[1:17])
	return u, true
}

// prefixEnd returns the smallest key greater than every key starting with p.
func prefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}
