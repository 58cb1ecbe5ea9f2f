package webpush

import (
	"net/http"
	"strconv"
	"unicode/utf8"
)

// Errno is autopush's stable application-level error number, sent as
// "errno" in every error response body. The numbers, their HTTP statuses
// and meanings are the reference's ("Error Codes" in its HTTP API docs,
// and autoendpoint's error and router types).
type Errno int

// The errnos the reference documents or sends. It defines no 107, 115 or
// 203: those numbers are unused, as they are here.
const (
	// ErrnoNone: the reference sends "errno": null for some errors (a bad
	// message id, a database failure).
	ErrnoNone                Errno = 0
	ErrnoMissingCryptoKeys   Errno = 101
	ErrnoInvalidEndpoint     Errno = 102
	ErrnoExpiredEndpoint     Errno = 103
	ErrnoPayloadTooLarge     Errno = 104
	ErrnoEndpointUnavailable Errno = 105
	ErrnoInvalidSubscription Errno = 106
	ErrnoInvalidRouterType   Errno = 108
	ErrnoInvalidAuth         Errno = 109
	ErrnoInvalidCryptoKeys   Errno = 110
	ErrnoMissingHeader       Errno = 111
	ErrnoInvalidTTL          Errno = 112
	ErrnoInvalidTopic        Errno = 113
	ErrnoNegativeTTL         Errno = 114
	ErrnoRetryBackoff        Errno = 201
	ErrnoRetryImmediate      Errno = 202
	ErrnoBridgeConfig        Errno = 900
	ErrnoBridgeAuth          Errno = 901
	ErrnoBridgeConnect       Errno = 902
	ErrnoBridgeTimeout       Errno = 903
	ErrnoUnknown             Errno = 999
)

// ErrnoMoreInfo is the "more_info" link of every error body, the
// reference's value verbatim.
const ErrnoMoreInfo = "http://autopush.readthedocs.io/en/latest/http.html#error-codes"

// ErrnoInfo describes one errno.
type ErrnoInfo struct {
	Errno Errno
	// Status is the HTTP status the reference answers with.
	Status int
	// Meaning is the documented meaning (the "Error Codes" list).
	Meaning string
	// Message is the reference's usual "message" for it (its error text).
	Message string
}

// errnoTable is the one source of truth; keep it in errno order.
var errnoTable = []ErrnoInfo{
	{ErrnoMissingCryptoKeys, 400, "Missing necessary crypto keys", "Missing necessary crypto keys"},
	{ErrnoInvalidEndpoint, 404, "Invalid URL endpoint", "Invalid token"},
	{ErrnoExpiredEndpoint, 410, "Expired URL endpoint", "UAID not found"},
	{ErrnoPayloadTooLarge, 413, "Data payload too large", "A payload reached size limit."},
	{ErrnoEndpointUnavailable, 410, "Endpoint became unavailable during request", "User was deleted during routing"},
	{ErrnoInvalidSubscription, 410, "Invalid subscription", "No such subscription"},
	{ErrnoInvalidRouterType, 400, "Router type is invalid", "Invalid router type"},
	{ErrnoInvalidAuth, 401, "Invalid authentication", "Invalid Authentication"},
	{ErrnoInvalidCryptoKeys, 400, "Invalid crypto keys specified", "Invalid crypto keys specified"},
	{ErrnoMissingHeader, 400, "Missing Required Header", "Missing TTL value"},
	{ErrnoInvalidTTL, 400, "Invalid TTL header value", "Invalid TTL header value"},
	{ErrnoInvalidTopic, 400, "Invalid Topic header value", "Topic must be no greater than 32 characters"},
	{ErrnoNegativeTTL, 400, "Invalid TTL header value (negative)", "TTL must be greater than 0"},
	{ErrnoRetryBackoff, 503, "Use exponential back-off for retries", "Database error while saving notification"},
	{ErrnoRetryImmediate, 503, "Immediate retry ok", "Immediate retry ok"},
	{ErrnoBridgeConfig, 502, "Internal Bridge misconfiguration", "Internal Bridge misconfiguration"},
	{ErrnoBridgeAuth, 502, "Invalid authentication", "Bridge authentication error"},
	{ErrnoBridgeConnect, 502, "An error occurred while establishing a connection", "Error while connecting to bridge service"},
	{ErrnoBridgeTimeout, 502, "The request timed out", "Bridge request timeout"},
	{ErrnoUnknown, 500, "Unknown error", "Unknown error"},
}

// Errnos lists every errno with its status, meaning and message, in errno
// order: the error-code docs are generated from it and checked against it.
// The slice is a copy.
func Errnos() []ErrnoInfo { return append([]ErrnoInfo(nil), errnoTable...) }

// Info returns e's table entry; false for an errno not in the table
// (ErrnoNone included).
func (e Errno) Info() (ErrnoInfo, bool) {
	for _, in := range errnoTable {
		if in.Errno == e {
			return in, true
		}
	}
	return ErrnoInfo{}, false
}

// Status is the HTTP status that goes with e (500 for one not in the table).
func (e Errno) Status() int {
	if in, ok := e.Info(); ok {
		return in.Status
	}
	return http.StatusInternalServerError
}

// HTTPError builds the error response for e; message "" takes the table's.
func (e Errno) HTTPError(message string) *HTTPError {
	in, ok := e.Info()
	if !ok {
		in.Status = http.StatusInternalServerError
	}
	if message == "" {
		message = in.Message
	}
	return &HTTPError{Status: in.Status, Errno: e, Message: message}
}

// HTTPError is an error response: its body is the reference's
//
//	{"code":404,"errno":102,"error":"Not Found","message":"...","more_info":"..."}
//
// with "error" the status text and "errno" null for ErrnoNone.
type HTTPError struct {
	Status  int
	Errno   Errno
	Message string
}

func (e *HTTPError) Error() string {
	return "webpush: " + strconv.Itoa(e.Status) + " errno " + strconv.Itoa(int(e.Errno)) + ": " + e.Message
}

// AppendJSON appends the response body to dst.
func (e *HTTPError) AppendJSON(dst []byte) []byte {
	dst = append(dst, `{"code":`...)
	dst = strconv.AppendInt(dst, int64(e.Status), 10)
	dst = append(dst, `,"errno":`...)
	if e.Errno == ErrnoNone {
		dst = append(dst, "null"...)
	} else {
		dst = strconv.AppendInt(dst, int64(e.Errno), 10)
	}
	dst = append(dst, `,"error":`...)
	dst = errnoAppendJSONString(dst, http.StatusText(e.Status))
	dst = append(dst, `,"message":`...)
	dst = errnoAppendJSONString(dst, e.Message)
	dst = append(dst, `,"more_info":"`+ErrnoMoreInfo+`"}`...)
	return dst
}

// errnoAppendJSONString appends s as a JSON string. Invalid UTF-8 becomes
// U+FFFD; '<', '>' and '&' are escaped as encoding/json does, since
// messages can quote request input.
func errnoAppendJSONString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				dst = append(dst, '\\', c)
			case c == '\n':
				dst = append(dst, '\\', 'n')
			case c == '\r':
				dst = append(dst, '\\', 'r')
			case c == '\t':
				dst = append(dst, '\\', 't')
			case c < 0x20 || c == '<' || c == '>' || c == '&':
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			default:
				dst = append(dst, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			// Valid JSON, but not valid JavaScript: escaped as encoding/json does.
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[r&0xF])
		default:
			dst = append(dst, s[i:i+size]...)
		}
		i += size
	}
	return append(dst, '"')
}
