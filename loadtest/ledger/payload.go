package ledger

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// A push's plaintext says who sent it to whom and when, and its padding is
// a function of those, so the user agent checks the whole content after
// decrypting:
//
//	"LTP1" | run u32 | worker u32 | ua u32 | seq u64 | at i64 | padding...
//
// run tells runs apart, worker and seq name the push in the sending
// worker's ledger, ua is the user agent it was addressed to, at is its
// scheduled send time (nanoseconds on the worker's clock).
const PayloadHeader = 32

// MaxPayload keeps the aes128gcm body (plaintext + 1 delimiter + 16 tag +
// 86 header) within the 4,096 bytes the protocol allows.
const MaxPayload = 3993

var payloadMagic = [4]byte{'L', 'T', 'P', '1'}

// PushID names one push.
type PushID struct {
	Run, Worker, UA uint32
	Seq             uint64
	At              int64
}

// AppendPayload appends the size-byte plaintext of id.
func AppendPayload(dst []byte, id PushID, size int) []byte {
	dst = append(dst, payloadMagic[:]...)
	dst = binary.BigEndian.AppendUint32(dst, id.Run)
	dst = binary.BigEndian.AppendUint32(dst, id.Worker)
	dst = binary.BigEndian.AppendUint32(dst, id.UA)
	dst = binary.BigEndian.AppendUint64(dst, id.Seq)
	dst = binary.BigEndian.AppendUint64(dst, uint64(id.At))
	start := len(dst)
	dst = append(dst, make([]byte, size-PayloadHeader)...)
	fillPaddingAt(dst[start:], id, 0)
	return dst
}

// ErrContent is a plaintext that is not what was sent.
var ErrContent = errors.New("content differs from what was sent")

// ParsePayload checks a plaintext of the expected size and returns its id.
func ParsePayload(p []byte, size int) (PushID, error) {
	var id PushID
	if len(p) != size {
		return id, fmt.Errorf("%w: %d bytes, sent %d", ErrContent, len(p), size)
	}
	if [4]byte(p[:4]) != payloadMagic {
		return id, fmt.Errorf("%w: no magic", ErrContent)
	}
	id.Run = binary.BigEndian.Uint32(p[4:])
	id.Worker = binary.BigEndian.Uint32(p[8:])
	id.UA = binary.BigEndian.Uint32(p[12:])
	id.Seq = binary.BigEndian.Uint64(p[16:])
	id.At = int64(binary.BigEndian.Uint64(p[24:]))
	var want [256]byte
	pad := p[PayloadHeader:]
	for off := 0; off < len(pad); off += len(want) {
		chunk := pad[off:min(off+len(want), len(pad))]
		fillPaddingAt(want[:len(chunk)], id, off)
		if string(chunk) != string(want[:len(chunk)]) {
			return id, fmt.Errorf("%w: padding", ErrContent)
		}
	}
	return id, nil
}

// fillPaddingAt writes the padding bytes [off, off+len(dst)) of id: a
// splitmix64 stream seeded by the id.
func fillPaddingAt(dst []byte, id PushID, off int) {
	seed := id.Seq ^ uint64(id.Run)<<32 ^ uint64(id.Worker)<<48 ^ uint64(id.UA)
	word := off / 8
	var w [8]byte
	for i := 0; i < len(dst); {
		binary.LittleEndian.PutUint64(w[:], splitmix(seed+uint64(word)*0x9E3779B97F4A7C15))
		skip := 0
		if i == 0 {
			skip = off % 8
		}
		i += copy(dst[i:], w[skip:])
		word++
	}
}

func splitmix(x uint64) uint64 {
	x += 0x9E3779B97F4A7C15
	x = (x ^ x>>30) * 0xBF58476D1CE4E5B9
	x = (x ^ x>>27) * 0x94D049BB133111EB
	return x ^ x>>31
}
