package nodeapi

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/autopush-go/autopush/internal/protocol"
)

// ClientConfig configures a Client; zero fields take the defaults stated.
type ClientConfig struct {
	// Secret is the node secret sent as a bearer token; "" sends none
	// (nodes then refuse every call).
	Secret string
	// Timeout bounds one call, connection included. Default 3s.
	Timeout time.Duration
	// ConnectTimeout bounds the TCP connect. Default: Timeout.
	ConnectTimeout time.Duration
	// IdleConnsPerNode keeps that many keep-alive connections per node.
	// Default 16.
	IdleConnsPerNode int
	// Observe, if set, is told the outcome of every call: the status, or
	// the error when the node could not be reached or did not answer in
	// time. For metrics.
	Observe func(call Call, status int, err error, took time.Duration)
}

// Client calls connection nodes' internal APIs over pooled keep-alive
// connections. Safe for concurrent use.
type Client struct {
	http    *http.Client
	auth    []string // {"Bearer <secret>"}, or nil
	timeout time.Duration
	observe func(Call, int, error, time.Duration)
	local   atomic.Pointer[localNode]
}

// localNode is a connection node in this process and its URL.
type localNode struct {
	url  string
	node Node
}

// NewClient makes a Client.
func NewClient(cfg ClientConfig) *Client {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 3 * time.Second
	}
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = cfg.Timeout
	}
	if cfg.IdleConnsPerNode <= 0 {
		cfg.IdleConnsPerNode = 16
	}
	dialer := &net.Dialer{Timeout: cfg.ConnectTimeout, KeepAlive: 30 * time.Second}
	tr := &http.Transport{
		Proxy:                 nil, // internal addresses: never through a proxy
		DialContext:           dialer.DialContext,
		MaxIdleConns:          0, // no overall limit; per node below
		MaxIdleConnsPerHost:   cfg.IdleConnsPerNode,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: cfg.Timeout,
		DisableCompression:    true,
	}
	c := &Client{http: &http.Client{Transport: tr}, timeout: cfg.Timeout, observe: cfg.Observe}
	if cfg.Secret != "" {
		c.auth = []string{"Bearer " + cfg.Secret}
	}
	return c
}

// SetLocal has calls to url (a node URL as router records store it) go
// to n, a connection node in this process, by a method call: no HTTP, no
// JSON, no secret (the single-node server, and a node calling itself).
// The answers are n's, as the node API would have carried them; calls
// are observed as the others.
func (c *Client) SetLocal(url string, n Node) {
	c.local.Store(&localNode{url: url, node: n})
}

// localFor is the node in this process whose URL is node, or nil.
func (c *Client) localFor(node string) Node {
	if l := c.local.Load(); l != nil && l.url == node {
		return l.node
	}
	return nil
}

// Push delivers n to the client uaid on node (its base URL, as router
// records store it); connectedAt, when not 0, names the connection
// expected (Node.Deliver). err is set when the node could not be reached
// or did not answer in time. n is the caller's again once Push returns.
func (c *Client) Push(ctx context.Context, node string, uaid [16]byte, n *protocol.Notification, connectedAt int64) (int, error) {
	if l := c.localFor(node); l != nil {
		start := time.Now()
		code := l.Deliver(uaid, n, connectedAt)
		c.report(CallPush, code, nil, start)
		return code, nil
	}
	query := ""
	if connectedAt != 0 {
		query = "?connected_at=" + strconv.FormatInt(connectedAt, 10)
	}
	return c.do(ctx, CallPush, http.MethodPut, node, uaid, query, AppendNotification(nil, n))
}

// Notif tells node that uaid has stored messages to read.
func (c *Client) Notif(ctx context.Context, node string, uaid [16]byte) (int, error) {
	if l := c.localFor(node); l != nil {
		start := time.Now()
		code := l.Check(uaid)
		c.report(CallNotif, code, nil, start)
		return code, nil
	}
	return c.do(ctx, CallNotif, http.MethodPut, node, uaid, "", nil)
}

// Drop asks node to close its connection of uaid if it is at least as old
// as connectedAt (a newer connection exists elsewhere).
func (c *Client) Drop(ctx context.Context, node string, uaid [16]byte, connectedAt int64) (int, error) {
	if l := c.localFor(node); l != nil {
		start := time.Now()
		code := l.Drop(uaid, connectedAt)
		c.report(CallDrop, code, nil, start)
		return code, nil
	}
	return c.do(ctx, CallDrop, http.MethodDelete, node, uaid, "/"+strconv.FormatInt(connectedAt, 10), nil)
}

// CloseIdle closes the kept-alive connections.
func (c *Client) CloseIdle() { c.http.CloseIdleConnections() }

func (c *Client) do(ctx context.Context, call Call, method, node string, uaid [16]byte, suffix string, body []byte) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	url := appendPath(make([]byte, 0, len(node)+64), node, call, uaid, suffix)
	// body is the call's own: the transport may still read it after Do
	// returns (a node that answers before reading it all).
	var rd io.Reader
	if len(body) > 0 {
		rd = bytes.NewReader(body)
	}
	start := time.Now()
	req, err := http.NewRequestWithContext(ctx, method, string(url), rd)
	if err != nil {
		c.report(call, 0, err, start)
		return 0, err
	}
	if c.auth != nil {
		req.Header["Authorization"] = c.auth
	}
	if len(body) > 0 {
		req.Header["Content-Type"] = jsonType
	}
	resp, err := c.http.Do(req)
	if err != nil {
		c.report(call, 0, err, start)
		return 0, err
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	resp.Body.Close()
	c.report(call, resp.StatusCode, nil, start)
	return resp.StatusCode, nil
}

func (c *Client) report(call Call, status int, err error, start time.Time) {
	if c.observe != nil {
		c.observe(call, status, err, time.Since(start))
	}
}

var jsonType = []string{"application/json"}

// appendPath appends node's URL of a call: {node}/push/{uaid} or
// {node}/notif/{uaid}, then suffix as it is (a push's query, a drop's
// /{connected_at}).
func appendPath(dst []byte, node string, call Call, uaid [16]byte, suffix string) []byte {
	dst = append(dst, node...)
	if call == CallPush {
		dst = append(dst, "/push/"...)
	} else {
		dst = append(dst, "/notif/"...)
	}
	dst = protocol.AppendUAID(dst, uaid)
	return append(dst, suffix...)
}
