package httpapi

import (
	"errors"
	"io"
	"net"
	"net/http"
	"os"

	"github.com/cloudwego/hertz/pkg/app"

	"github.com/autopush-go/autopush/internal/errno"
)

// The answers to a body that cannot be read whole.
var (
	errBody        = errno.Unnumbered(http.StatusBadRequest, "The request body is incomplete or malformed")
	errBodyTimeout = errno.Unnumbered(http.StatusRequestTimeout, "The request body did not arrive within the time allowed")
)

// ReadBody returns the request body, whole: every byte of its
// Content-Length, or a chunked body up to its last chunk, and not one
// byte past its end (what follows on the connection is the next
// request). It refuses a body over limit (tooLarge) without reading more
// than one byte past the limit, one that has not arrived by the
// request's deadline (request-timeout: 408), and one that ends early or
// is malformed (400). On any error the connection closes after the
// answer, the rest of the body unread. A streamed body is read into
// *buf, grown to limit+1 when smaller.
func ReadBody(c *app.RequestContext, buf *[]byte, limit int, tooLarge *errno.HTTPError) ([]byte, *errno.HTTPError) {
	cl := c.Request.Header.ContentLength()
	if cl > limit {
		return nil, tooLarge
	}
	if !c.Request.IsBodyStream() {
		b := c.Request.Body()
		if len(b) > limit {
			return nil, tooLarge
		}
		return b, nil
	}
	if cap(*buf) < limit+1 {
		*buf = make([]byte, limit+1)
	}
	// A Content-Length body is read into exactly its length: Hertz
	// 0.10.6's stream reads the connection into all of the buffer it is
	// given, past the body's end, taking the next request's bytes.
	// (Its chunked reader stops at each chunk's end by itself.)
	want := limit + 1
	if cl >= 0 {
		want = cl
	}
	b := (*buf)[:want]
	r := c.RequestBodyStream()
	for n := 0; ; {
		if cl >= 0 && n == cl {
			return b[:n], nil
		}
		m, err := r.Read(b[n:])
		n += m
		switch {
		case n > limit:
			return nil, tooLarge
		case err == io.EOF: // the stream's end: the body is complete
			return b[:n], nil
		case err == nil:
			continue
		case isTimeout(err):
			return nil, errBodyTimeout
		}
		return nil, errBody
	}
}

// isTimeout reports a read deadline passing.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}
