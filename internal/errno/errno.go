package errno

import (
	"net/http"
	"strconv"
	"unicode/utf8"
)

// Code is autopush's stable application-level error number, sent as
// "errno" in every error response body. The numbers, their HTTP statuses
// and meanings are the reference's ("Error Codes" in its HTTP API docs,
// and autoendpoint's error and router types).
type Code int

// The errnos the reference documents or sends. It defines no 107, 115 or
// 203: those numbers are unused, as they are here.
const (
	// None: the reference sends "errno": null for some errors (a bad
	// message id, a database failure).
	None                Code = 0
	MissingCryptoKeys   Code = 101
	InvalidEndpoint     Code = 102
	ExpiredEndpoint     Code = 103
	PayloadTooLarge     Code = 104
	EndpointUnavailable Code = 105
	InvalidSubscription Code = 106
	InvalidRouterType   Code = 108
	InvalidAuth         Code = 109
	InvalidCryptoKeys   Code = 110
	MissingHeader       Code = 111
	InvalidTTL          Code = 112
	InvalidTopic        Code = 113
	NegativeTTL         Code = 114
	RetryBackoff        Code = 201
	RetryImmediate      Code = 202
	BridgeConfig        Code = 900
	BridgeAuth          Code = 901
	BridgeConnect       Code = 902
	BridgeTimeout       Code = 903
	Unknown             Code = 999
)

// MoreInfo is the "more_info" link of every error body, the
// reference's value verbatim.
const MoreInfo = "http://autopush.readthedocs.io/en/latest/http.html#error-codes"

// Info describes one errno.
type Info struct {
	Errno Code
	// Status is the HTTP status the reference answers with.
	Status int
	// Meaning is the documented meaning (the "Error Codes" list).
	Meaning string
	// Message is the reference's usual "message" for it (its error text).
	Message string
}

// table is the one source of truth; keep it in errno order.
var table = []Info{
	{MissingCryptoKeys, 400, "Missing necessary crypto keys", "Missing necessary crypto keys"},
	{InvalidEndpoint, 404, "Invalid URL endpoint", "Invalid token"},
	{ExpiredEndpoint, 410, "Expired URL endpoint", "UAID not found"},
	{PayloadTooLarge, 413, "Data payload too large", "A payload reached size limit."},
	{EndpointUnavailable, 410, "Endpoint became unavailable during request", "User was deleted during routing"},
	{InvalidSubscription, 410, "Invalid subscription", "No such subscription"},
	{InvalidRouterType, 400, "Router type is invalid", "Invalid router type"},
	{InvalidAuth, 401, "Invalid authentication", "Invalid Authentication"},
	{InvalidCryptoKeys, 400, "Invalid crypto keys specified", "Invalid crypto keys specified"},
	{MissingHeader, 400, "Missing Required Header", "Missing TTL value"},
	{InvalidTTL, 400, "Invalid TTL header value", "Invalid TTL header value"},
	{InvalidTopic, 400, "Invalid Topic header value", "Topic must be no greater than 32 characters"},
	{NegativeTTL, 400, "Invalid TTL header value (negative)", "TTL must be greater than 0"},
	{RetryBackoff, 503, "Use exponential back-off for retries", "Database error while saving notification"},
	{RetryImmediate, 503, "Immediate retry ok", "Immediate retry ok"},
	{BridgeConfig, 502, "Internal Bridge misconfiguration", "Internal Bridge misconfiguration"},
	{BridgeAuth, 502, "Invalid authentication", "Bridge authentication error"},
	{BridgeConnect, 502, "An error occurred while establishing a connection", "Error while connecting to bridge service"},
	{BridgeTimeout, 502, "The request timed out", "Bridge request timeout"},
	{Unknown, 500, "Unknown error", "Unknown error"},
}

// Table lists every errno with its status, meaning and message, in errno
// order: the error-code docs are generated from it and checked against it.
// The slice is a copy.
func Table() []Info { return append([]Info(nil), table...) }

// Info returns e's table entry; false for an errno not in the table
// (None included).
func (e Code) Info() (Info, bool) {
	for _, in := range table {
		if in.Errno == e {
			return in, true
		}
	}
	return Info{}, false
}

// Status is the HTTP status that goes with e (500 for one not in the table).
func (e Code) Status() int {
	if in, ok := e.Info(); ok {
		return in.Status
	}
	return http.StatusInternalServerError
}

// HTTPError builds the error response for e; message "" takes the table's.
func (e Code) HTTPError(message string) *HTTPError {
	in, ok := e.Info()
	if !ok {
		in.Status = http.StatusInternalServerError
	}
	if message == "" {
		message = in.Message
	}
	return &HTTPError{Status: in.Status, Errno: e, Message: message}
}

// Unnumbered builds an error response the reference's errno table has no
// code for: its body carries "errno": null (None), status and message as
// given. It is for answers this implementation adds (a limit the
// reference does not have, an API of its own) and the HTTP layer's own
// refusals; an answer the table has a code for takes Code.HTTPError.
func Unnumbered(status int, message string) *HTTPError {
	return &HTTPError{Status: status, Errno: None, Message: message}
}

// HTTPError is an error response: its body is the reference's
//
//	{"code":404,"errno":102,"error":"Not Found","message":"...","more_info":"..."}
//
// with "error" the status text and "errno" null for None.
type HTTPError struct {
	Status  int
	Errno   Code
	Message string
}

func (e *HTTPError) Error() string {
	return "errno: " + strconv.Itoa(e.Status) + " errno " + strconv.Itoa(int(e.Errno)) + ": " + e.Message
}

// AppendJSON appends the response body to dst.
func (e *HTTPError) AppendJSON(dst []byte) []byte {
	dst = append(dst, `{"code":`...)
	dst = strconv.AppendInt(dst, int64(e.Status), 10)
	dst = append(dst, `,"errno":`...)
	if e.Errno == None {
		dst = append(dst, "null"...)
	} else {
		dst = strconv.AppendInt(dst, int64(e.Errno), 10)
	}
	dst = append(dst, `,"error":`...)
	dst = appendJSONString(dst, http.StatusText(e.Status))
	dst = append(dst, `,"message":`...)
	dst = appendJSONString(dst, e.Message)
	dst = append(dst, `,"more_info":"`+MoreInfo+`"}`...)
	return dst
}

// appendJSONString appends s as a JSON string. Invalid UTF-8 becomes
// U+FFFD; '<', '>' and '&' are escaped as encoding/json does, since
// messages can quote request input.
func appendJSONString(dst []byte, s string) []byte {
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
