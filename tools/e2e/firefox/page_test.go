//go:build linux

package firefox

import (
	"embed"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

//go:embed testdata
var pageFiles embed.FS

// report is what the page or its service worker POSTs to /report.
type report struct {
	Kind  string          `json:"kind"` // ready, result, push, pushsubscriptionchange, error
	ID    int             `json:"id"`
	Value json.RawMessage `json:"value"`
	Error string          `json:"error"`
	Data  *string         `json:"data"` // push: base64, null without payload
	at    time.Time
}

// page serves the test page on 127.0.0.1 (a secure context, so plain
// HTTP is enough for service workers and push), hands it commands and
// collects its reports. Its methods are safe for concurrent use.
type page struct {
	srv  *httptest.Server
	cmds chan map[string]any

	mu      sync.Mutex
	reports []report
	changed chan struct{} // closed and replaced on each report
	nextID  int
}

func startPage(t *testing.T) *page {
	p := &page{cmds: make(chan map[string]any, 1), changed: make(chan struct{})}
	mux := http.NewServeMux()
	file := func(name, ctype string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			b, _ := pageFiles.ReadFile("testdata/" + name)
			w.Header().Set("Content-Type", ctype)
			w.Header().Set("Cache-Control", "no-store")
			w.Write(b)
		}
	}
	mux.HandleFunc("GET /{$}", file("index.html", "text/html; charset=utf-8"))
	mux.HandleFunc("GET /sw.js", file("sw.js", "text/javascript"))
	mux.HandleFunc("GET /cmd", p.serveCmd)
	mux.HandleFunc("POST /report", p.serveReport)
	p.srv = httptest.NewServer(mux)
	t.Cleanup(p.srv.Close)
	return p
}

func (p *page) url() string { return p.srv.URL + "/" }

// serveCmd long-polls: the page asks again after an empty answer.
func (p *page) serveCmd(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	select {
	case cmd := <-p.cmds:
		json.NewEncoder(w).Encode(cmd)
	case <-time.After(20 * time.Second):
		w.Write([]byte(`{"op":"none"}`))
	case <-r.Context().Done():
	}
}

func (p *page) serveReport(w http.ResponseWriter, r *http.Request) {
	var rep report
	b, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(b, &rep); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	rep.at = time.Now()
	p.mu.Lock()
	p.reports = append(p.reports, rep)
	close(p.changed)
	p.changed = make(chan struct{})
	p.mu.Unlock()
}

// since returns the reports from index i on, and a channel closed at the
// next report.
func (p *page) since(i int) ([]report, <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]report(nil), p.reports[min(i, len(p.reports)):]...), p.changed
}

// mark is the index of the next report, to wait for reports after now.
func (p *page) mark() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.reports)
}

// waitFor waits up to d for reports from index from on to satisfy done,
// and returns them.
func (p *page) waitFor(from int, d time.Duration, done func([]report) bool) ([]report, bool) {
	deadline := time.After(d)
	for {
		reps, changed := p.since(from)
		if done(reps) {
			return reps, true
		}
		select {
		case <-changed:
		case <-deadline:
			return reps, false
		}
	}
}

// do runs one command in the page and decodes its result into out.
func (p *page) do(op string, args map[string]any, d time.Duration, out any) error {
	p.mu.Lock()
	p.nextID++
	id := p.nextID
	from := len(p.reports)
	p.mu.Unlock()
	cmd := map[string]any{"id": id, "op": op}
	for k, v := range args {
		cmd[k] = v
	}
	select {
	case p.cmds <- cmd:
	case <-time.After(d):
		return fmt.Errorf("page: %s: the page did not ask for a command within %v", op, d)
	}
	var res report
	_, ok := p.waitFor(from, d, func(reps []report) bool {
		for _, r := range reps {
			if r.Kind == "result" && r.ID == id {
				res = r
				return true
			}
		}
		return false
	})
	switch {
	case !ok:
		return fmt.Errorf("page: %s did not settle within %v", op, d)
	case res.Error != "":
		return fmt.Errorf("page: %s: %s", op, res.Error)
	}
	return json.Unmarshal(res.Value, out)
}

// pushes returns the data of the push events among reps (nil for a push
// without payload), and any errors or subscription changes reported.
func pushes(reps []report) (data [][]byte, trouble []string) {
	for _, r := range reps {
		switch r.Kind {
		case "push":
			if r.Data == nil {
				data = append(data, nil)
				continue
			}
			b, err := base64.StdEncoding.DecodeString(*r.Data)
			if err != nil {
				trouble = append(trouble, "push data is not base64: "+err.Error())
			}
			data = append(data, b)
		case "error", "pushsubscriptionchange":
			trouble = append(trouble, r.Kind+" "+r.Error)
		}
	}
	return data, trouble
}
