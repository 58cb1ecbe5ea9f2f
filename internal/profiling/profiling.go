// Package profiling serves Go's runtime profiles (net/http/pprof) under
// /debug/pprof/ on an internal listener, for an operator who turns them
// on (the tiers' pprof setting, off by default): a CPU profile or an
// execution trace shows where a push's or a hello's time goes on the
// running node. Never mount it on a public listener: goroutine dumps and
// the command line name internals an outsider should not see.
package profiling

import (
	"context"
	"fmt"
	"net/http"
	"net/http/pprof"
	"strconv"
	"time"
)

// MaxSeconds bounds a CPU profile's or a trace's duration: the listener's
// write deadline is lifted by that much for that response alone.
const MaxSeconds = 120

// Register adds the /debug/pprof/ routes to mux.
func Register(mux *http.ServeMux) {
	// Index also serves the named profiles: heap, allocs, goroutine,
	// threadcreate, mutex, block (/debug/pprof/heap and so on).
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/profile", timed(pprof.Profile, 30))
	mux.HandleFunc("GET /debug/pprof/trace", timed(pprof.Trace, 1))
}

// timed runs a handler that records for ?seconds=N (default def, at most
// MaxSeconds) with the connection's write deadline moved past its end.
// The listeners' WriteTimeout is seconds, set for their own routes;
// pprof refuses a duration longer than it, so the handler is shown a
// server without one: this response's deadline is the one set here.
func timed(h http.HandlerFunc, def int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		sec := def
		if v := r.FormValue("seconds"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 || n > MaxSeconds {
				http.Error(w, fmt.Sprintf("seconds must be a whole number from 1 to %d", MaxSeconds), http.StatusBadRequest)
				return
			}
			sec = n
		}
		deadline := time.Now().Add(time.Duration(sec)*time.Second + 10*time.Second)
		if err := http.NewResponseController(w).SetWriteDeadline(deadline); err != nil {
			http.Error(w, "profiling: cannot extend the write deadline: "+err.Error(), http.StatusInternalServerError)
			return
		}
		q := r.URL.Query()
		q.Set("seconds", strconv.Itoa(sec))
		r = r.WithContext(context.WithValue(r.Context(), http.ServerContextKey, &http.Server{}))
		r.URL.RawQuery = q.Encode()
		r.Form = nil
		h(w, r)
	}
}
