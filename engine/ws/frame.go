package ws

import (
	"encoding/binary"
	"math"
	"strconv"

	gws "github.com/gobwas/ws"
)

// Aliases of the gobwas/ws types this package speaks, so callers need not
// import gobwas/ws under another name.
type (
	Header     = gws.Header
	OpCode     = gws.OpCode
	StatusCode = gws.StatusCode
)

// Opcodes (RFC 6455 §5.2).
const (
	OpContinuation = gws.OpContinuation
	OpText         = gws.OpText
	OpBinary       = gws.OpBinary
	OpClose        = gws.OpClose
	OpPing         = gws.OpPing
	OpPong         = gws.OpPong
)

// Close status codes the node sends or receives (RFC 6455 §7.4.1).
const (
	StatusNormalClosure           = gws.StatusNormalClosure
	StatusGoingAway               = gws.StatusGoingAway
	StatusProtocolError           = gws.StatusProtocolError
	StatusUnsupportedData         = gws.StatusUnsupportedData
	StatusNoStatusRcvd            = gws.StatusNoStatusRcvd
	StatusInvalidFramePayloadData = gws.StatusInvalidFramePayloadData
	StatusPolicyViolation         = gws.StatusPolicyViolation
	StatusMessageTooBig           = gws.StatusMessageTooBig
	StatusInternalServerError     = gws.StatusInternalServerError
	// StatusTryAgainLater (1013, IANA registry) suits shedding load.
	StatusTryAgainLater StatusCode = 1013
)

// MaxControlPayload is the largest payload of a ping, pong or close frame.
const MaxControlPayload = gws.MaxControlFramePayloadSize

// CloseError is a violation by the peer that fails the connection: send a
// close frame with Code (AppendClose does it) and close.
type CloseError struct {
	Code   StatusCode
	Reason string // short enough to fit a close frame
}

func (e *CloseError) Error() string {
	return "ws: " + e.Reason + " (close " + strconv.Itoa(int(e.Code)) + ")"
}

// AppendClose appends the close frame answering e.
func (e *CloseError) AppendClose(dst []byte) []byte {
	return AppendClose(dst, e.Code, e.Reason)
}

func closeErr(code StatusCode, reason string) *CloseError {
	return &CloseError{Code: code, Reason: reason}
}

// Framing errors from ParseFrame.
var (
	ErrReservedBits      = closeErr(StatusProtocolError, "RSV bits set without extension")
	ErrReservedOpcode    = closeErr(StatusProtocolError, "reserved opcode")
	ErrControlFragmented = closeErr(StatusProtocolError, "fragmented control frame")
	ErrControlTooLong    = closeErr(StatusProtocolError, "control frame payload over 125 bytes")
	ErrUnmasked          = closeErr(StatusProtocolError, "client frame not masked")
	ErrBadLength         = closeErr(StatusProtocolError, "64-bit length with most significant bit set")
	ErrFrameTooBig       = closeErr(StatusMessageTooBig, "frame too big")
)

// ParseFrame parses one client frame from the start of buf, with a payload
// of at most maxPayload bytes (maxPayload <= 0: no limit but int range).
//
// n == 0 and err == nil: the frame is not complete yet, nothing was touched;
// call again with more bytes. Otherwise n is the frame's length and payload
// is buf's payload bytes, unmasked in place (so these bytes must not be
// parsed again; discard n). payload's capacity ends with the frame, so
// appending to it cannot overwrite the next frame.
//
// An error is a *CloseError; it is decided from the header bytes alone, as
// soon as they are present, so an oversized frame is refused before its
// payload is buffered. h is the header as sent (Masked and Mask included);
// it is the zero Header on need-more or error.
func ParseFrame(buf []byte, maxPayload int) (h Header, payload []byte, n int, err error) {
	return parseFrame(buf, maxPayload, true)
}

// parseFrame is ParseFrame (masked: a client's frame, unmasked in place)
// and ParseServerFrame (not masked: a server's, left as it is). One body,
// the length decoding inline: this is the server's hot path.
func parseFrame(buf []byte, maxPayload int, masked bool) (h Header, payload []byte, n int, err error) {
	if len(buf) < 2 {
		return Header{}, nil, 0, nil
	}
	b0, b1 := buf[0], buf[1]
	if err := checkStart(b0, b1); err != nil {
		return Header{}, nil, 0, err
	}
	if b1&0x80 != 0 != masked {
		if masked {
			return Header{}, nil, 0, ErrUnmasked
		}
		return Header{}, nil, 0, ErrMasked
	}
	// The minimal length encoding RFC 6455 §5.2 asks senders for is not
	// enforced: refusing 126+16-bit for a small payload buys nothing.
	hl, length := 2, uint64(b1&0x7f)
	switch length {
	case 126:
		if len(buf) < 4 {
			return Header{}, nil, 0, nil
		}
		length, hl = uint64(binary.BigEndian.Uint16(buf[2:4])), 4
	case 127:
		if len(buf) < 10 {
			return Header{}, nil, 0, nil
		}
		length, hl = binary.BigEndian.Uint64(buf[2:10]), 10
	}
	if length > maxLength || maxPayload > 0 && length > uint64(maxPayload) {
		return Header{}, nil, 0, lengthError(length)
	}
	if masked {
		hl += 4 // masking key
	}
	if len(buf) < hl || uint64(len(buf)-hl) < length {
		return Header{}, nil, 0, nil
	}
	h = Header{Fin: b0&0x80 != 0, OpCode: OpCode(b0 & 0x0f), Masked: masked, Length: int64(length)}
	n = hl + int(length)
	payload = buf[hl:n:n]
	if masked {
		copy(h.Mask[:], buf[hl-4:hl])
		gws.Cipher(payload, h.Mask, 0)
	}
	return h, payload, n, nil
}

// checkStart checks the first two bytes of a frame, the mask bit aside
// (the caller's role decides it).
func checkStart(b0, b1 byte) error {
	op := OpCode(b0 & 0x0f)
	switch {
	case b0&0x70 != 0:
		return ErrReservedBits
	case op.IsReserved():
		return ErrReservedOpcode
	case op.IsControl() && b0&0x80 == 0:
		return ErrControlFragmented
	case op.IsControl() && b1&0x7f > MaxControlPayload:
		return ErrControlTooLong
	}
	return nil
}

// maxLength keeps a frame's length within int range.
const maxLength = math.MaxInt - gws.MaxHeaderSize

// lengthError is the error of a length parseFrame refuses.
func lengthError(length uint64) error {
	if length>>63 != 0 {
		return ErrBadLength
	}
	return ErrFrameTooBig
}
