package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/panjf2000/gnet/v2"
)

// Broadcasts (megaphone), the node's side: a goroutine polls the
// versions (Megaphone's API, or storage, where autoendpoint's publish
// route writes) every MegaphonePollInterval into the session core's table
// (engine/broadcast); when a version changed, the fan-out brings every
// registered client up to date on its own loop, BroadcastBatch clients
// per turn and at most BroadcastRate a second per loop, so deliveries keep
// flowing while a million clients hear of it.

// maxMegaphoneBody bounds what a poll reads: MaxIDs ids and versions of
// at most 256 bytes each fit well within it.
const maxMegaphoneBody = 1 << 20

// pollBroadcasts runs until the node closes.
func (srv *Server) pollBroadcasts() {
	defer srv.bg.Done()
	t := time.NewTicker(srv.cfg.MegaphonePollInterval)
	defer t.Stop()
	for {
		select {
		case <-srv.quit:
			return
		case <-t.C:
			srv.pollOnce()
		}
	}
}

// pollOnce reads the versions once; a failure keeps the last ones.
func (srv *Server) pollOnce() {
	ctx, cancel := context.WithTimeout(context.Background(), srv.cfg.StorageTimeout)
	defer cancel()
	var (
		versions map[string]string
		err      error
	)
	if srv.cfg.MegaphoneAPIURL != "" {
		versions, err = srv.fetchMegaphone(ctx)
	} else {
		err = srv.timed(func() (err error) { versions, err = srv.store.Broadcasts(ctx); return err })
	}
	if err != nil {
		srv.metrics.pollErrors.Inc()
		srv.log.Warn("broadcast poll failed: keeping the last versions", "error", err)
		return
	}
	srv.metrics.pollOK.Inc()
	res := srv.env.Broadcasts.Update(versions)
	if res.Rejected > 0 {
		srv.log.Warn("broadcast poll: ids or versions refused", "rejected", res.Rejected)
	}
	if res.Changed+res.Added > 0 {
		srv.log.Info("broadcast versions changed", "changed", res.Changed, "added", res.Added)
	}
	if res.Changed > 0 {
		srv.metrics.broadcastChanges.Add(res.Changed)
		srv.fanOut()
	}
}

// fetchMegaphone GETs the Megaphone API: {"broadcasts": {"id": "version"}}.
func (srv *Server) fetchMegaphone(ctx context.Context) (map[string]string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.cfg.MegaphoneAPIURL, nil)
	if err != nil {
		return nil, fmt.Errorf("engine: megaphone: %w", err)
	}
	if srv.cfg.MegaphoneAPIToken != "" {
		req.Header.Set("Authorization", "Bearer "+srv.cfg.MegaphoneAPIToken)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := srv.megaphone.Do(req)
	if err != nil {
		return nil, fmt.Errorf("engine: megaphone: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxMegaphoneBody+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("engine: megaphone: read: %w", err)
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("engine: megaphone: status %d", resp.StatusCode)
	case len(body) > maxMegaphoneBody:
		return nil, fmt.Errorf("engine: megaphone: answer over %d bytes", maxMegaphoneBody)
	}
	var out struct {
		Broadcasts map[string]string `json:"broadcasts"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		return nil, fmt.Errorf("engine: megaphone: answer: %w", err)
	}
	if out.Broadcasts == nil {
		return nil, errors.New(`engine: megaphone: answer has no "broadcasts" object`)
	}
	return out.Broadcasts, nil
}

// fanOut brings every registered client up to date with the broadcast
// versions, on its own event loop: one goroutine per loop hands the loop
// BroadcastBatch clients at a time, waits until they are done, and keeps
// to BroadcastRate clients per second before handing the next. Between
// two batches the loop serves its connections and the node API, and the
// change's CPU cost (a write per client) is spread out instead of taking
// the cores deliveries need. (A batch handed to a loop from its own task
// would run back to back: gnet drains its task queue before polling
// again.) A client already current sends nothing, so overlapping
// fan-outs and the keepalive tick's catch-up never repeat a version.
func (srv *Server) fanOut() {
	start := time.Now()
	loops := map[gnet.EventLoop][]*conn{}
	srv.registry.each(func(cn *conn) {
		el := cn.c.EventLoop()
		loops[el] = append(loops[el], cn)
	})
	srv.pending.Add(1)
	var wg sync.WaitGroup
	for el, list := range loops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			srv.fanOutLoop(el, list)
		}()
	}
	go func() {
		wg.Wait()
		srv.metrics.fanOutSeconds.UpdateDuration(start)
		srv.pending.Add(-1)
	}()
}

func (srv *Server) fanOutLoop(el gnet.EventLoop, list []*conn) {
	done := make(chan struct{}, 1)
	// Each batch has its share of a second at BroadcastRate.
	share := time.Second * time.Duration(srv.cfg.BroadcastBatch) / time.Duration(srv.cfg.BroadcastRate)
	pace := time.NewTimer(0)
	defer pace.Stop()
	for len(list) > 0 {
		select {
		case <-pace.C:
		case <-srv.quit:
			return
		}
		pace.Reset(share)
		batch := list[:min(len(list), srv.cfg.BroadcastBatch)]
		list = list[len(batch):]
		err := el.Execute(context.Background(), gnet.RunnableFunc(func(context.Context) error {
			for _, cn := range batch {
				if !cn.s.Closed() {
					lc := srv.begin(cn)
					cn.s.Broadcast(&lc.Ctx)
					lc.end()
				}
			}
			done <- struct{}{}
			return nil
		}))
		if err != nil {
			return // the node is stopping
		}
		select {
		case <-done:
		case <-srv.quit:
			return
		}
	}
}

// healthCache keeps the storage health the public port's health checks
// report: at most one check runs at a time, and a result serves for a
// second, so a flood of health checks costs storage nothing more.
type healthCache struct {
	mu      sync.Mutex
	running bool
	at      time.Time
	err     error
}

// storageHealth returns storage's health, fresh or at most a second old;
// while a check runs, callers get the last result. A fresh result marks
// storage up or down (storagewatch.go).
func (srv *Server) storageHealth(ctx context.Context) error {
	h := &srv.health
	h.mu.Lock()
	if h.running || time.Since(h.at) < time.Second {
		err := h.err
		h.mu.Unlock()
		return err
	}
	h.running = true
	h.mu.Unlock()
	err := srv.timed(func() error { return srv.store.Health(ctx) })
	h.mu.Lock()
	h.running, h.at, h.err = false, time.Now(), err
	h.mu.Unlock()
	srv.noteHealth(err)
	return err
}
