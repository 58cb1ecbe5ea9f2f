package engine

import (
	"context"
	"math/rand/v2"
	"time"
)

// Drain stops the node gracefully, as on SIGTERM:
//
//  1. new upgrades get 503, /__lbheartbeat__ fails (the load balancer stops
//     sending clients), direct deliveries get 503 (endpoints store) and
//     autoconnect_draining reads 1 (the node API serves it until step 4);
//  2. registered clients are sent the 1001 close in random order, spread
//     over DrainWindow, so they do not all reconnect elsewhere at once;
//  3. each connection stays open until the client answers with its own
//     close frame: the acks it sent before it read ours are read and
//     count (their deletes done before the connection closes), so nothing
//     it acked is stored again or left stored. A client that has not
//     answered PongTimeout after the last 1001 is dropped. Each close
//     stores the client's unacked direct notifications (leave);
//  4. the listeners stop and the queued storage work (deletes, leaves)
//     completes before Drain returns.
//
// Nothing answered 201 to an application server is lost, and nothing a
// client acked before it answered the close comes back
// (stack/cmd/autopush TestDrainLoop). A SIGKILL, by contrast, loses the
// direct notifications written to clients and not yet acked: the endpoint
// got 200 from this node for them and did not store them (at most
// MaxUnacked per client).
func (srv *Server) Drain(ctx context.Context) error {
	srv.env.Draining.Store(true)
	var list []*conn
	srv.registry.each(func(cn *conn) { list = append(list, cn) })
	rand.Shuffle(len(list), func(i, j int) { list[i], list[j] = list[j], list[i] })
	srv.log.Info("draining", "clients", len(list), "window", srv.cfg.DrainWindow.String())
	var step time.Duration
	if len(list) > 0 {
		step = srv.cfg.DrainWindow / time.Duration(len(list))
	}
	next := time.Now()
	for _, cn := range list {
		// Jitter within each client's share of the window.
		at := next.Add(time.Duration(rand.Int64N(int64(step) + 1)))
		next = next.Add(step)
		if wait := time.Until(at); wait > 0 {
			select {
			case <-ctx.Done():
				return srv.Close()
			case <-time.After(wait):
			}
		}
		srv.onLoop(cn, cn.s.Shutdown)
	}
	answered := time.Now().Add(srv.cfg.PongTimeout)
	for srv.registry.len() > 0 && ctx.Err() == nil && time.Now().Before(answered) {
		time.Sleep(10 * time.Millisecond)
	}
	return srv.Close()
}
