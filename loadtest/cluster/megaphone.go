package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/autopush-go/autopush/loadtest/agent"
)

// Megaphone is the run's own Megaphone: the read API the engines poll
// (GET /v1/broadcasts: {"code":200,"broadcasts":{...}}) on 127.0.0.1,
// serving Config.Broadcasts ids, all at one version that change moves on.
// Megaphone is a third party's service: a stand-in that speaks its API,
// as the engine's tests use.
type Megaphone struct {
	srv *http.Server
	url string

	mu       sync.Mutex
	ids      []string
	version  string
	requests int64
}

// BroadcastIDs names the n ids of a run.
func BroadcastIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("loadtest/b%d", i)
	}
	return ids
}

func startMegaphone(n int) (*Megaphone, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("loadtest: megaphone: %w", err)
	}
	m := &Megaphone{ids: BroadcastIDs(n), version: agent.VersionAt(time.Now().UnixNano())}
	m.url = "http://" + ln.Addr().String() + "/v1/broadcasts"
	m.srv = &http.Server{Handler: http.HandlerFunc(m.serve), ReadHeaderTimeout: 5 * time.Second}
	go m.srv.Serve(ln)
	return m, nil
}

func (m *Megaphone) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/broadcasts" || r.Method != http.MethodGet {
		http.NotFound(w, r)
		return
	}
	m.mu.Lock()
	m.requests++
	all := make(map[string]string, len(m.ids))
	for _, id := range m.ids {
		all[id] = m.version
	}
	m.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"code": 200, "broadcasts": all})
}

// Change moves every id to a new version named for now, and returns it
// and its instant.
func (m *Megaphone) Change() (string, int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	at := time.Now().UnixNano()
	m.version = agent.VersionAt(at)
	return m.version, at
}

func (m *Megaphone) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	m.srv.Shutdown(ctx)
}
