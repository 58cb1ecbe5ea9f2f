package mozlog

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"
)

// New returns a logger for the named service writing to w at the given
// level ("debug", "info", "warn", "error"; default info).
func New(w io.Writer, service, level string) *slog.Logger {
	host, _ := os.Hostname()
	return slog.New(&handler{w: w, logger: service, host: host, pid: os.Getpid(), level: parseLevel(level), mu: &sync.Mutex{}})
}

func parseLevel(s string) slog.Level {
	switch strings.ToLower(s) {
	case "debug":
		return slog.LevelDebug
	case "warn", "warning":
		return slog.LevelWarn
	case "error":
		return slog.LevelError
	}
	return slog.LevelInfo
}

// severity maps slog levels to syslog severities (MozLog's Severity).
func severity(l slog.Level) int {
	switch {
	case l >= slog.LevelError:
		return 3
	case l >= slog.LevelWarn:
		return 4
	case l >= slog.LevelInfo:
		return 6
	}
	return 7
}

type handler struct {
	w      io.Writer
	logger string
	host   string
	pid    int
	level  slog.Level
	attrs  []slog.Attr
	group  string
	mu     *sync.Mutex
}

func (h *handler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level }

func (h *handler) Handle(_ context.Context, r slog.Record) error {
	fields := map[string]any{}
	add := func(a slog.Attr) bool {
		if h.group != "" {
			a.Key = h.group + "." + a.Key
		}
		if v := a.Value.Resolve(); v.Kind() == slog.KindAny {
			if err, ok := v.Any().(error); ok {
				fields[a.Key] = err.Error()
				return true
			}
			fields[a.Key] = v.Any()
		} else {
			fields[a.Key] = v.Any()
		}
		return true
	}
	for _, a := range h.attrs {
		add(a)
	}
	r.Attrs(add)
	fields["msg"] = r.Message
	t := r.Time
	if t.IsZero() {
		t = time.Now()
	}
	line, err := json.Marshal(map[string]any{
		"Timestamp": t.UnixNano(), "Type": h.logger + ".log", "Logger": h.logger, "Hostname": h.host,
		"EnvVersion": "2.0", "Severity": severity(r.Level), "Pid": h.pid, "Fields": fields,
	})
	if err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	_, err = h.w.Write(append(line, '\n'))
	return err
}

func (h *handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append(append([]slog.Attr(nil), h.attrs...), attrs...)
	return &c
}

func (h *handler) WithGroup(name string) slog.Handler {
	c := *h
	if c.group != "" {
		name = c.group + "." + name
	}
	c.group = name
	return &c
}
