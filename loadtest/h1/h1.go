// Package h1 is the load generator's HTTP/1.1 client: a fixed pool of
// keep-alive connections to one server, a request written with one write
// and its answer read on the caller's goroutine. net/http's client keeps
// two goroutines per connection and hands every request and answer
// between them, which at 10,000 pushes a second cost the generator about
// as much CPU as the server it measures (docs/benchmarks.md); this client
// does only what the load tester asks of HTTP: a request with a body, the
// status, the Location header and a bounded part of the body.
package h1

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"
)

// Config of a Client.
type Config struct {
	// Host is the Host header's value (host:port).
	Host string
	// Conns bounds the connections open at once; a request waits for
	// one (within Timeout).
	Conns int
	// Dial opens a connection to the server.
	Dial func(ctx context.Context) (net.Conn, error)
	// Timeout bounds one request: waiting for a connection, connecting,
	// writing and reading the answer.
	Timeout time.Duration
}

// Client sends requests over at most Config.Conns connections. Safe for
// concurrent use.
type Client struct {
	cfg  Config
	idle chan *conn // Conns slots: a kept-alive connection, or nil (none open)
}

type conn struct {
	nc  net.Conn
	br  *bufio.Reader
	buf []byte
}

// New makes a Client; it connects on first use.
func New(cfg Config) *Client {
	c := &Client{cfg: cfg, idle: make(chan *conn, cfg.Conns)}
	for range cfg.Conns {
		c.idle <- nil
	}
	return c
}

// Header is one request header.
type Header struct{ Name, Value string }

// Request is one request: method, path (with query), headers, body.
type Request struct {
	Method, Path string
	Header       []Header
	Body         []byte
}

// Response is what the load tester reads of an answer.
type Response struct {
	Status   int
	Location string
	// RetryAfter is the Retry-After header ("" when absent).
	RetryAfter string
	// Body is the answer's body, its first MaxBody bytes.
	Body []byte
}

// MaxBody bounds the part of an answer's body a Response keeps (the rest
// is read and dropped).
const MaxBody = 4096

// ErrTimeout is a request that found no connection within the timeout.
var ErrTimeout = errors.New("h1: timeout waiting for a connection")

// Do sends req and reads its answer. An error means the request may or
// may not have reached the server (the connection is then closed).
func (c *Client) Do(req *Request) (Response, error) {
	deadline := time.Now().Add(c.cfg.Timeout)
	t := time.NewTimer(c.cfg.Timeout)
	var cn *conn
	select {
	case cn = <-c.idle:
		t.Stop()
	case <-t.C:
		return Response{}, ErrTimeout
	}
	resp, keep, err := c.roundTrip(&cn, req, deadline)
	if err != nil || !keep {
		if cn != nil {
			cn.nc.Close()
		}
		cn = nil
	}
	c.idle <- cn
	return resp, err
}

// roundTrip writes req on *cn (dialling one when nil) and reads the
// answer; keep reports whether the connection may carry another request.
func (c *Client) roundTrip(cnp **conn, req *Request, deadline time.Time) (Response, bool, error) {
	if *cnp == nil {
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		nc, err := c.cfg.Dial(ctx)
		cancel()
		if err != nil {
			return Response{}, false, err
		}
		*cnp = &conn{nc: nc, br: bufio.NewReaderSize(nc, 4096)}
	}
	cn := *cnp
	if err := cn.nc.SetDeadline(deadline); err != nil {
		return Response{}, false, err
	}
	b := append(cn.buf[:0], req.Method...)
	b = append(b, ' ')
	b = append(b, req.Path...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, c.cfg.Host...)
	for _, h := range req.Header {
		b = append(b, "\r\n"...)
		b = append(b, h.Name...)
		b = append(b, ": "...)
		b = append(b, h.Value...)
	}
	b = append(b, "\r\nContent-Length: "...)
	b = strconv.AppendInt(b, int64(len(req.Body)), 10)
	b = append(b, "\r\n\r\n"...)
	b = append(b, req.Body...)
	cn.buf = b
	if _, err := cn.nc.Write(b); err != nil {
		return Response{}, false, err
	}
	return readResponse(cn.br, req.Method == "HEAD")
}

// readResponse reads one answer: its status line, headers and body
// (Content-Length, chunked, or to the connection's end).
func readResponse(br *bufio.Reader, head bool) (Response, bool, error) {
	var r Response
	line, err := br.ReadSlice('\n')
	if err != nil {
		return r, false, err
	}
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[8] != ' ' {
		return r, false, fmt.Errorf("h1: bad status line %q", trim(line))
	}
	if r.Status, err = strconv.Atoi(string(line[9:12])); err != nil {
		return r, false, fmt.Errorf("h1: bad status line %q", trim(line))
	}
	keep := line[7] == '1' // HTTP/1.0 closes unless told otherwise
	length, chunked := int64(-1), false
	for {
		line, err = br.ReadSlice('\n')
		if err != nil {
			return r, false, err
		}
		line = trim(line)
		if len(line) == 0 {
			break
		}
		i := bytes.IndexByte(line, ':')
		if i <= 0 {
			return r, false, fmt.Errorf("h1: bad header line %q", line)
		}
		name, value := line[:i], bytes.TrimSpace(line[i+1:])
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			if length, err = strconv.ParseInt(string(value), 10, 64); err != nil || length < 0 {
				return r, false, fmt.Errorf("h1: bad Content-Length %q", value)
			}
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			chunked = bytes.EqualFold(value, []byte("chunked"))
		case bytes.EqualFold(name, []byte("Connection")):
			if bytes.EqualFold(value, []byte("close")) {
				keep = false
			} else if bytes.EqualFold(value, []byte("keep-alive")) {
				keep = true
			}
		case bytes.EqualFold(name, []byte("Location")):
			r.Location = string(value)
		case bytes.EqualFold(name, []byte("Retry-After")):
			r.RetryAfter = string(value)
		}
	}
	switch {
	case head || r.Status == 204 || r.Status == 304 || r.Status/100 == 1:
		return r, keep, nil
	case chunked:
		err = readChunked(br, &r)
	case length >= 0:
		err = readSized(br, length, &r)
	default:
		keep = false
		err = readToEOF(br, &r)
	}
	return r, keep && err == nil, err
}

// readSized reads a body of exactly n bytes, keeping its first MaxBody.
func readSized(br *bufio.Reader, n int64, r *Response) error {
	keep := min(n, int64(MaxBody-len(r.Body)))
	if keep > 0 {
		b := make([]byte, keep)
		if _, err := io.ReadFull(br, b); err != nil {
			return err
		}
		r.Body = append(r.Body, b...)
	}
	_, err := io.CopyN(io.Discard, br, n-keep)
	return err
}

// readToEOF reads a body that ends with the connection.
func readToEOF(br *bufio.Reader, r *Response) error {
	var b [MaxBody]byte
	n, err := io.ReadFull(br, b[:])
	r.Body = append(r.Body, b[:n]...)
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return nil
	}
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, br)
	return err
}

// readChunked reads a chunked body and its trailer.
func readChunked(br *bufio.Reader, r *Response) error {
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return err
		}
		line = trim(line)
		if i := bytes.IndexByte(line, ';'); i >= 0 {
			line = line[:i]
		}
		size, err := strconv.ParseInt(string(bytes.TrimSpace(line)), 16, 64)
		if err != nil || size < 0 {
			return fmt.Errorf("h1: bad chunk size %q", line)
		}
		if size == 0 {
			for { // trailer, to its empty line
				line, err := br.ReadSlice('\n')
				if err != nil {
					return err
				}
				if len(trim(line)) == 0 {
					return nil
				}
			}
		}
		if err := readSized(br, size, r); err != nil {
			return err
		}
		if line, err := br.ReadSlice('\n'); err != nil || len(trim(line)) != 0 {
			return fmt.Errorf("h1: chunk not followed by CRLF")
		}
	}
}

func trim(b []byte) []byte { return bytes.TrimRight(b, "\r\n") }
