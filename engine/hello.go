package engine

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/autopush-go/autopush/engine/ws"
	"github.com/autopush-go/autopush/internal/protocol"
	"github.com/autopush-go/autopush/storage"
)

// hello registers the connection: a known uaid is kept (a different one
// makes Firefox drop every subscription), an unknown or invalid one is
// replaced. Storage work runs on a worker; helloDone finishes on the loop.
func (s *session) hello(m *protocol.ClientMessage) {
	if s.state != stHello {
		s.fail("bad_json", ws.StatusPolicyViolation, "hello sent twice")
		return
	}
	s.srv.metrics.hellos.Inc()
	uaid, known := protocol.ParseUAID(m.UAID)
	known = known && m.HasUAID && uaid != [16]byte{}
	s.state = stHelloing
	s.connectedAt = time.Now().UnixMilli()
	s.srv.wheel.schedule(s, time.Now().UnixMilli()+s.srv.cfg.PingInterval.Milliseconds())
	connectedAt := s.connectedAt
	if known {
		// Findable before the router record names this connection: a
		// push routed here meanwhile then gets "busy" (and a storage check
		// is owed) rather than "not here", which would make the endpoint
		// clear the node_id this hello is writing and store the push
		// after the hello's check has read (it would wait for the next
		// reconnect). An older local connection is evicted now.
		s.uaid = uaid
		s.enroll()
	}
	if !s.srv.workers.submit(func() { s.srv.helloJob(s, uaid, known, connectedAt) }) {
		s.srv.metrics.overloaded.Inc()
		s.fail("storage", ws.StatusTryAgainLater, "server overloaded")
	}
}

// helloResult is what helloJob learned.
type helloResult struct {
	uaid   [16]byte
	cursor uint64
	fresh  bool
	err    error
}

// helloJob runs on a worker: look the user up, record the connection,
// evict an older connection held by another node.
func (srv *Server) helloJob(s *session, uaid [16]byte, known bool, connectedAt int64) {
	ctx, cancel := context.WithTimeout(context.Background(), srv.cfg.StorageTimeout)
	defer cancel()
	res := helloResult{uaid: uaid}
	var prev storage.User
	found := false
	if known {
		err := srv.timed(func() (err error) {
			prev, err = srv.store.GetUser(ctx, uaid)
			return err
		})
		switch {
		case err == nil && prev.RouterType == storage.RouterWebPush:
			found = true
		case err == nil, errors.Is(err, storage.ErrNotFound):
		default:
			res.err = err
			s.onLoop(func() { s.helloDone(res) })
			return
		}
	}
	if !found {
		res.uaid, res.fresh = newUAID(), true
	}
	res.err = srv.timed(func() error {
		return srv.store.Connect(ctx, storage.User{
			UAID: res.uaid, RouterType: storage.RouterWebPush, NodeID: srv.nodeURL, ConnectedAt: connectedAt,
		})
	})
	if found {
		res.cursor = prev.Cursor
		if res.err == nil && prev.NodeID != "" && prev.NodeID != srv.nodeURL && prev.ConnectedAt < connectedAt {
			srv.evictRemote(ctx, prev.NodeID, res.uaid, prev.ConnectedAt)
		}
	}
	s.onLoop(func() { s.helloDone(res) })
}

// helloDone answers the hello on the loop, registers the session (evicting
// an older local one) and starts the stored-message drain.
func (s *session) helloDone(res helloResult) {
	if s.state != stHelloing {
		return
	}
	if res.err != nil {
		// timed counted the failure already (a conflict is not one);
		// fail counts the closed connection in errors_total{kind="storage"}.
		s.srv.log.Warn("hello failed", "error", res.err)
		code := ws.StatusCode(ws.StatusTryAgainLater)
		if errors.Is(res.err, storage.ErrConflict) {
			code = ws.StatusPolicyViolation // a newer connection of this user exists
		}
		s.fail("storage", code, "hello failed")
		return
	}
	if res.fresh {
		s.srv.metrics.helloNewUAID.Inc()
	}
	if res.uaid != s.uaid {
		// Unknown, or a fresh uaid: registered under the one it asked for.
		s.srv.registry.remove(s)
		s.uaid = res.uaid
	}
	if !s.enroll() {
		// A newer connection of this user agent is here: it wins.
		s.fail("storage", ws.StatusPolicyViolation, "connected elsewhere")
		return
	}
	s.cursor, s.state, s.registered = res.cursor, stReady, true
	s.sendJSON(func(b []byte) []byte { return protocol.AppendHelloReply(b, s.uaid, 200, nil, nil) })
	if s.closed() {
		return
	}
	// Drain took its list of sessions already: one that finishes its hello
	// afterwards closes itself (after registering, so leave clears its
	// node_id), or it would hold the drain until its deadline.
	if s.srv.draining.Load() {
		s.closeWith(1001, "server shutting down")
		return
	}
	s.requestCheck()
}

// enroll puts the session in the node's registry under s.uaid and
// evicts an older local connection of the same user agent; false when a
// newer one holds it.
func (s *session) enroll() bool {
	old, ok := s.srv.registry.put(s)
	if old != nil {
		connectedAt := s.connectedAt
		old.onLoop(func() { old.evict(connectedAt) })
	}
	return ok
}

// evict closes this connection because a newer one of the same user agent
// exists (connectedAt is the newer one's or the caller's bound). Runs on
// the loop; returns the node API status.
func (s *session) evict(connectedAt int64) int {
	if s.state != stReady || s.connectedAt > connectedAt {
		return http.StatusNotFound
	}
	s.srv.metrics.evictions.Inc()
	s.closeWith(4000, "connected elsewhere")
	return http.StatusOK
}

func newUAID() [16]byte {
	var u [16]byte
	rand.Read(u[:])
	u[6] = u[6]&0x0f | 0x40 // version 4
	u[8] = u[8]&0x3f | 0x80 // RFC 4122 variant
	return u
}

// timed runs a storage call and records its latency and failures.
func (srv *Server) timed(call func() error) error {
	start := time.Now()
	err := call()
	srv.metrics.storageSeconds.UpdateDuration(start)
	if err != nil && !errors.Is(err, storage.ErrNotFound) && !errors.Is(err, storage.ErrConflict) {
		srv.metrics.storageErrors.Inc()
	}
	return err
}

// nodeClient talks to other nodes' internal APIs.
var nodeClient = &http.Client{Timeout: 3 * time.Second}

// nodeCall makes an authenticated call to another node's internal API.
func (srv *Server) nodeCall(ctx context.Context, method, url string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		return 0, err
	}
	if srv.cfg.NodeSecret != "" {
		req.Header.Set("Authorization", "Bearer "+srv.cfg.NodeSecret)
	}
	resp, err := nodeClient.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// evictRemote asks the node holding an older connection to drop it. Best
// effort: a node that is gone has no connection to drop.
func (srv *Server) evictRemote(ctx context.Context, node string, uaid [16]byte, connectedAt int64) {
	url := fmt.Sprintf("%s/notif/%s/%s", node, protocol.FormatUAID(uaid), strconv.FormatInt(connectedAt, 10))
	if code, err := srv.nodeCall(ctx, http.MethodDelete, url); err != nil {
		srv.log.Info("evict on other node failed", "node", node, "error", err)
	} else if code == http.StatusOK {
		srv.metrics.evictions.Inc()
	}
}

// notifyHolder tells whichever node now holds uaid to check storage: the
// seed's "re-read the router record and notify the new node", used after
// this node stored messages for a user that moved.
func (srv *Server) notifyHolder(ctx context.Context, uaid [16]byte) {
	if s := srv.registry.get(uaid); s != nil {
		s.onLoop(func() { s.requestCheck() })
		return
	}
	u, err := srv.store.GetUser(ctx, uaid)
	if err != nil || u.NodeID == "" || u.NodeID == srv.nodeURL {
		return
	}
	srv.nodeCall(ctx, http.MethodPut, u.NodeID+"/notif/"+protocol.FormatUAID(uaid))
}
