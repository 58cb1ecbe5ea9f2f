package loadtest

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
const payloadHeader = 32

var payloadMagic = [4]byte{'L', 'T', 'P', '1'}

// pushID names one push.
type pushID struct {
	run, worker, ua uint32
	seq             uint64
	at              int64
}

// appendPayload appends the size-byte plaintext of id.
func appendPayload(dst []byte, id pushID, size int) []byte {
	dst = append(dst, payloadMagic[:]...)
	dst = binary.BigEndian.AppendUint32(dst, id.run)
	dst = binary.BigEndian.AppendUint32(dst, id.worker)
	dst = binary.BigEndian.AppendUint32(dst, id.ua)
	dst = binary.BigEndian.AppendUint64(dst, id.seq)
	dst = binary.BigEndian.AppendUint64(dst, uint64(id.at))
	start := len(dst)
	dst = append(dst, make([]byte, size-payloadHeader)...)
	fillPadding(dst[start:], id)
	return dst
}

// errContent is a plaintext that is not what was sent.
var errContent = errors.New("content differs from what was sent")

// parsePayload checks a plaintext of the expected size and returns its id.
func parsePayload(p []byte, size int) (pushID, error) {
	var id pushID
	if len(p) != size {
		return id, fmt.Errorf("%w: %d bytes, sent %d", errContent, len(p), size)
	}
	if [4]byte(p[:4]) != payloadMagic {
		return id, fmt.Errorf("%w: no magic", errContent)
	}
	id.run = binary.BigEndian.Uint32(p[4:])
	id.worker = binary.BigEndian.Uint32(p[8:])
	id.ua = binary.BigEndian.Uint32(p[12:])
	id.seq = binary.BigEndian.Uint64(p[16:])
	id.at = int64(binary.BigEndian.Uint64(p[24:]))
	var want [256]byte
	pad := p[payloadHeader:]
	for off := 0; off < len(pad); off += len(want) {
		chunk := pad[off:min(off+len(want), len(pad))]
		fillPaddingAt(want[:len(chunk)], id, off)
		if string(chunk) != string(want[:len(chunk)]) {
			return id, fmt.Errorf("%w: padding", errContent)
		}
	}
	return id, nil
}

func fillPadding(dst []byte, id pushID) { fillPaddingAt(dst, id, 0) }

// fillPaddingAt writes the padding bytes [off, off+len(dst)) of id: a
// splitmix64 stream seeded by the id.
func fillPaddingAt(dst []byte, id pushID, off int) {
	seed := id.seq ^ uint64(id.run)<<32 ^ uint64(id.worker)<<48 ^ uint64(id.ua)
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
