package ws

import (
	"encoding/binary"
	"sync"
	"unicode/utf8"
)

// Message is one complete message from the peer (the client, on the node).
type Message struct {
	Op OpCode // OpText, OpBinary, OpPing, OpPong or OpClose
	// Code is the close status for OpClose: StatusNoStatusRcvd (1005) when
	// the close frame had no body. Zero for other opcodes.
	Code StatusCode
	// Payload is the data of a text, binary, ping or pong message, and the
	// reason (UTF-8, possibly empty) of a close. See the package doc for how
	// long it stays valid.
	Payload []byte
}

// Message errors from Assembler.Feed.
var (
	ErrUnexpectedContinuation = closeErr(StatusProtocolError, "continuation frame without a message to continue")
	ErrExpectedContinuation   = closeErr(StatusProtocolError, "new data frame inside a fragmented message")
	ErrMessageTooBig          = closeErr(StatusMessageTooBig, "message too big")
	ErrInvalidUTF8            = closeErr(StatusInvalidFramePayloadData, "invalid UTF-8 in text message")
	ErrCloseTooShort          = closeErr(StatusProtocolError, "close frame body of 1 byte")
	ErrCloseCode              = closeErr(StatusProtocolError, "invalid close code")
	ErrCloseReasonUTF8        = closeErr(StatusInvalidFramePayloadData, "invalid UTF-8 in close reason")
)

// Assembler turns the frames of one connection into messages. It lives in
// every connection's state, so it is 16 bytes and holds no buffer between
// messages: a buffer is taken from a pool only when a data message arrives
// fragmented, and returned once the message has been consumed. The zero
// value is ready to use.
type Assembler struct {
	buf   *[]byte // pooled; non-nil while a fragmented message is open or delivered
	valid uint32  // bytes of *buf checked to be whole valid UTF-8 (text only)
	op    OpCode  // opcode of the open fragmented message, 0 when none
	held  bool    // *buf is a delivered message: recycle on next Feed/Release
}

// Feed takes one frame from ParseFrame and returns a message when the frame
// completes one (ok == true). A data message may reach maxMessage bytes in
// total across fragments (maxMessage <= 0: no limit).
//
// A single-frame data message and every control message alias payload: the
// common case costs no copy and no allocation. Control frames may arrive
// between the fragments of a data message and are returned at once. On
// error (a *CloseError) the Assembler has been Reset.
func (a *Assembler) Feed(h Header, payload []byte, maxMessage int) (msg Message, ok bool, err error) {
	if h.OpCode.IsControl() {
		msg, err = controlMessage(h.OpCode, payload)
		if err != nil {
			a.Reset()
			return Message{}, false, err
		}
		return msg, true, nil
	}
	if a.held {
		a.Release()
	}
	if maxMessage <= 0 {
		maxMessage = int(^uint(0) >> 1)
	}

	if h.OpCode != OpContinuation {
		if a.op != 0 {
			a.Reset()
			return Message{}, false, ErrExpectedContinuation
		}
		if len(payload) > maxMessage {
			return Message{}, false, ErrMessageTooBig
		}
		if h.Fin {
			if h.OpCode == OpText && !utf8.Valid(payload) {
				return Message{}, false, ErrInvalidUTF8
			}
			return Message{Op: h.OpCode, Payload: payload}, true, nil
		}
		a.op = h.OpCode
		a.valid = 0
		a.buf = getBuf(len(payload))
	} else if a.op == 0 {
		return Message{}, false, ErrUnexpectedContinuation
	}

	b := *a.buf
	if len(payload) > maxMessage-len(b) {
		a.Reset()
		return Message{}, false, ErrMessageTooBig
	}
	if len(b)+len(payload) > cap(b) {
		nb := getBuf(len(b) + len(payload))
		*nb = append(*nb, b...)
		putBuf(a.buf)
		a.buf, b = nb, *nb
	}
	b = append(b, payload...)
	*a.buf = b

	if a.op == OpText {
		complete, valid := validUTF8Prefix(b[a.valid:])
		a.valid += uint32(complete)
		if !valid || h.Fin && int(a.valid) != len(b) {
			a.Reset()
			return Message{}, false, ErrInvalidUTF8
		}
	}
	if !h.Fin {
		return Message{}, false, nil
	}
	msg = Message{Op: a.op, Payload: b}
	a.op = 0
	a.held = true
	return msg, true, nil
}

// Release returns the buffer of a delivered reassembled message to the pool.
// Call it once that message has been handled (e.g. at the end of the
// traffic callback) so an idle connection holds no buffer; a fragmented
// message still open is kept. Cheap when there is nothing to release.
func (a *Assembler) Release() {
	if a.held {
		putBuf(a.buf)
		*a = Assembler{}
	}
}

// Reset drops any message in progress and returns its buffer to the pool:
// call it when the connection goes away.
func (a *Assembler) Reset() {
	if a.buf != nil {
		putBuf(a.buf)
	}
	*a = Assembler{}
}

// Fragmented reports whether a fragmented message is open (some of it was
// received, not its final frame).
func (a *Assembler) Fragmented() bool { return a.op != 0 }

func controlMessage(op OpCode, p []byte) (Message, error) {
	if op != OpClose {
		return Message{Op: op, Payload: p}, nil
	}
	switch len(p) {
	case 0:
		return Message{Op: OpClose, Code: StatusNoStatusRcvd, Payload: p}, nil
	case 1:
		return Message{}, ErrCloseTooShort
	}
	code := StatusCode(binary.BigEndian.Uint16(p))
	if !ValidCloseCode(code) {
		return Message{}, ErrCloseCode
	}
	reason := p[2:]
	if !utf8.Valid(reason) {
		return Message{}, ErrCloseReasonUTF8
	}
	return Message{Op: OpClose, Code: code, Payload: reason}, nil
}

// ValidCloseCode reports whether code may appear in a close frame on the
// wire (RFC 6455 §7.4): the defined codes except the reserved 1004 and the
// never-sent 1005, 1006 and 1015, plus 1012-1014 which IANA registered
// later, and the 3000-4999 ranges for libraries and applications.
func ValidCloseCode(code StatusCode) bool {
	switch {
	case code >= 1000 && code <= 1003:
		return true
	case code >= 1007 && code <= 1014:
		return true
	case code >= 3000 && code <= 4999:
		return true
	}
	return false
}

// Reassembly buffers come in size classes growing by 4x, each with its own
// sync.Pool of *[]byte (a pointer, so Put does not allocate). Messages
// larger than the biggest class get an unpooled buffer.
const (
	minBufClass = 1 << 10
	numClasses  = 6 // 1 KiB .. 1 MiB
)

var bufPools [numClasses]sync.Pool

func classOf(size int) int {
	c, s := 0, minBufClass
	for s < size {
		c++
		s <<= 2
	}
	return c
}

func getBuf(size int) *[]byte {
	c := classOf(size)
	if c >= numClasses {
		b := make([]byte, 0, size)
		return &b
	}
	if b, _ := bufPools[c].Get().(*[]byte); b != nil {
		return b
	}
	b := make([]byte, 0, minBufClass<<(2*c))
	return &b
}

func putBuf(b *[]byte) {
	c := classOf(cap(*b))
	if c >= numClasses || cap(*b) != minBufClass<<(2*c) {
		return
	}
	*b = (*b)[:0]
	bufPools[c].Put(b)
}
