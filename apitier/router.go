package apitier

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/google/uuid"

	"github.com/autopush-go/autopush/internal/errno"
	"github.com/autopush-go/autopush/internal/protocol"
	"github.com/autopush-go/autopush/storage"
)

// Routing a push (seed 000 "Push Characteristics", DESIGN.md §2):
//
//  1. The router record names a node: PUT {node}/push/{uaid}.
//     200: written to the client's socket; done, nothing stored.
//     404, or no answer (refused, reset, timeout): the client is not
//     there. Its node_id is cleared, on condition that connected_at is
//     still the one read (storage.ClearNode), so a client that has
//     reconnected since keeps its new record.
//     503: the client is busy (unacked messages in flight); the node now
//     owes it a storage check.
//  2. TTL 0: nobody took it, so it is dropped, never stored.
//  3. Store it (a topic replaces the stored message with its topic).
//  4. Read the router record again: the client may have connected, or
//     reconnected elsewhere, since step 1 and checked storage before the
//     message was stored. If a node is named now, PUT {node}/notif/{uaid}
//     tells it to check storage; a node that does not answer has its
//     node_id cleared.
//
// Whatever happens after step 3, the message is stored and the sender gets
// 201: the client finds it on its next check or connection. A user that
// vanished between steps 1 and 4 gets 410 errno 105, as in the reference.
//
// ctx is the request's, sctx bounds its storage calls.
func (s *Server) route(ctx, sctx context.Context, u *storage.User, n *protocol.Notification, pb *pushBuf) (string, *errno.HTTPError) {
	uaid := u.UAID
	if u.NodeID != "" {
		pb.json = protocol.AppendNotificationJSON(pb.json[:0], n)
		code, err := s.nodes.call(ctx, callPush, u.NodeID, uaid, pb.json, s.metrics)
		switch {
		case err == nil && code == http.StatusOK:
			return outcomeDirect, nil
		case err != nil || code == http.StatusNotFound:
			s.clearNode(sctx, u, err)
		case code != http.StatusServiceUnavailable:
			s.log.Warn("node refused a push", "node", u.NodeID, "status", code)
		}
	}
	if n.TTL == 0 {
		return outcomeDropped, nil
	}
	if e := s.save(sctx, uaid, n); e != nil {
		return "", e
	}
	u2, err := s.getUser(sctx, uaid)
	switch {
	case errors.Is(err, storage.ErrNotFound):
		return "", errUserDeleted
	case err != nil:
		s.log.Warn("re-read router record after storing", "error", err)
		return outcomeStored, nil
	case u2.NodeID == "":
		return outcomeStored, nil
	}
	if _, err := s.nodes.call(ctx, callNotif, u2.NodeID, uaid, nil, s.metrics); err != nil {
		s.clearNode(sctx, &u2, err)
	}
	return outcomeStored, nil
}

// clearNode clears u's node_id if it still names the connection read.
func (s *Server) clearNode(ctx context.Context, u *storage.User, why error) {
	start := time.Now()
	err := s.store.ClearNode(ctx, u.UAID, u.ConnectedAt)
	s.metrics.storage(start, err)
	if err != nil {
		s.log.Warn("clear node_id", "node", u.NodeID, "error", err)
		return
	}
	s.metrics.nodeCleared.Inc()
	if why != nil {
		s.log.Debug("node unreachable, node_id cleared", "node", u.NodeID, "error", why)
	}
}

// save stores n; storage unavailable is 503 errno 201 (retry later).
func (s *Server) save(ctx context.Context, uaid uuid.UUID, n *protocol.Notification) *errno.HTTPError {
	m := storage.Message{CHID: uuid.UUID(mustChannel(n.ChannelID)), Version: n.Version, Topic: n.Topic,
		SortKey: n.SortKey, TTL: n.TTL, Data: n.Data}
	if len(n.Headers) > 0 {
		m.Headers = make(map[string]string, len(n.Headers))
		for _, h := range n.Headers {
			m.Headers[h.Name] = h.Value
		}
	}
	start := time.Now()
	err := s.store.SaveMessage(ctx, uaid, m)
	s.metrics.storage(start, err)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, storage.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded):
		s.log.Warn("storage unavailable: message not saved", "error", err)
		return errStorage
	}
	s.log.Error("save message", "error", err)
	return errInternal
}

func mustChannel(s string) [16]byte {
	id, _ := protocol.ParseChannelID(s)
	return id
}

// nodeClient calls the connection nodes' internal API over pooled
// keep-alive connections. Safe for concurrent use.
type nodeClient struct {
	http    *http.Client
	auth    string // "Bearer <node-secret>", or ""
	timeout time.Duration
}

func newNodeClient(cfg Config) *nodeClient {
	dialer := &net.Dialer{Timeout: cfg.NodeConnectTimeout, KeepAlive: 30 * time.Second}
	tr := &http.Transport{
		Proxy:                 nil, // internal addresses: never through a proxy
		DialContext:           dialer.DialContext,
		MaxIdleConns:          0, // no overall limit; per node below
		MaxIdleConnsPerHost:   cfg.NodeIdleConns,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: cfg.NodeTimeout,
		DisableCompression:    true,
	}
	nc := &nodeClient{http: &http.Client{Transport: tr}, timeout: cfg.NodeTimeout}
	if cfg.NodeSecret != "" {
		nc.auth = "Bearer " + cfg.NodeSecret
	}
	return nc
}

// call makes one PUT {node}/{push|notif}/{uaid} and returns the status;
// err is set when the node could not be reached or did not answer in
// time.
func (nc *nodeClient) call(ctx context.Context, call, node string, uaid uuid.UUID, body []byte, m *apiMetrics) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, nc.timeout)
	defer cancel()
	var ub [64]byte
	url := append(append(append(ub[:0], "/"...), call...), '/')
	url = protocol.AppendUAID(url, uaid)
	// The transport may still read a body after Do returns (a node that
	// answers before reading it all), so it gets its own copy.
	var rd io.Reader
	if len(body) > 0 {
		rd = bytes.NewReader(append([]byte(nil), body...))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, node+string(url), rd)
	if err != nil {
		m.nodeCall(call, resultUnreachable, 0)
		return 0, err
	}
	if nc.auth != "" {
		req.Header["Authorization"] = []string{nc.auth}
	}
	if len(body) > 0 {
		req.Header["Content-Type"] = jsonTypeHeader
	}
	start := time.Now()
	resp, err := nc.http.Do(req)
	if err != nil {
		m.nodeCall(call, resultUnreachable, time.Since(start))
		return 0, err
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	resp.Body.Close()
	result := resultRefused
	switch resp.StatusCode {
	case http.StatusOK:
		result = resultOK
	case http.StatusAccepted:
		result = resultAccepted
	case http.StatusNotFound:
		result = resultNotHere
	case http.StatusServiceUnavailable:
		result = resultBusy
	}
	m.nodeCall(call, result, time.Since(start))
	return resp.StatusCode, nil
}

var jsonTypeHeader = []string{"application/json"}

func (nc *nodeClient) close() { nc.http.CloseIdleConnections() }
