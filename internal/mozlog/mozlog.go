package mozlog

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/autopush-go/autopush/internal/jsonscan"
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

// Handle writes r as one MozLog JSON line, encoded by hand (appended to
// a pooled buffer, no map, no reflection for the common kinds): the
// endpoint logs a line per request. Fields are sorted by key, a key given
// twice keeps its last value, as encoding/json's map did before.
func (h *handler) Handle(_ context.Context, r slog.Record) error {
	lb := linePool.Get().(*line)
	defer lb.release()
	fields := lb.fields[:0]
	add := func(a slog.Attr) bool {
		if h.group != "" {
			a.Key = h.group + "." + a.Key
		}
		for i := range fields {
			if fields[i].Key == a.Key {
				fields[i] = a
				return true
			}
		}
		fields = append(fields, a)
		return true
	}
	for _, a := range h.attrs {
		add(a)
	}
	r.Attrs(add)
	add(slog.String("msg", r.Message))
	slices.SortFunc(fields, func(a, b slog.Attr) int { return strings.Compare(a.Key, b.Key) })
	lb.fields = fields
	t := r.Time
	if t.IsZero() {
		t = time.Now()
	}
	b := append(lb.buf[:0], `{"EnvVersion":"2.0","Fields":{`...)
	for i, a := range fields {
		if i > 0 {
			b = append(b, ',')
		}
		b = jsonscan.AppendString(b, a.Key)
		b = append(b, ':')
		b = appendValue(b, a.Value)
	}
	b = append(b, `},"Hostname":`...)
	b = jsonscan.AppendString(b, h.host)
	b = append(b, `,"Logger":`...)
	b = jsonscan.AppendString(b, h.logger)
	b = append(b, `,"Pid":`...)
	b = strconv.AppendInt(b, int64(h.pid), 10)
	b = append(b, `,"Severity":`...)
	b = strconv.AppendInt(b, int64(severity(r.Level)), 10)
	b = append(b, `,"Timestamp":`...)
	b = strconv.AppendInt(b, t.UnixNano(), 10)
	b = append(b, `,"Type":`...)
	b = jsonscan.AppendString(b, h.logger)
	b = append(b[:len(b)-1], `.log"`...)
	b = append(b, "}\n"...)
	lb.buf = b
	h.mu.Lock()
	defer h.mu.Unlock()
	_, err := h.w.Write(b)
	return err
}

// line is one Handle's working memory.
type line struct {
	buf    []byte
	fields []slog.Attr
}

var linePool = sync.Pool{New: func() any { return &line{buf: make([]byte, 0, 512)} }}

// release returns lb to the pool without the values it held, unless one
// long line grew its buffer past what lines usually need.
func (lb *line) release() {
	clear(lb.fields)
	if cap(lb.buf) <= 16<<10 {
		linePool.Put(lb)
	}
}

// appendValue appends v as JSON: strings, numbers and booleans as such, a
// duration in nanoseconds and a time in RFC 3339 (as encoding/json wrote
// them), a group as an object, an error as its text, anything else as
// encoding/json writes it (its error's text when it cannot).
func appendValue(b []byte, v slog.Value) []byte {
	v = v.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return jsonscan.AppendString(b, v.String())
	case slog.KindInt64:
		return strconv.AppendInt(b, v.Int64(), 10)
	case slog.KindUint64:
		return strconv.AppendUint(b, v.Uint64(), 10)
	case slog.KindFloat64:
		return appendFloat(b, v.Float64())
	case slog.KindBool:
		return strconv.AppendBool(b, v.Bool())
	case slog.KindDuration:
		return strconv.AppendInt(b, int64(v.Duration()), 10)
	case slog.KindTime:
		return jsonscan.AppendString(b, v.Time().Format(time.RFC3339Nano))
	case slog.KindGroup:
		b = append(b, '{')
		for i, a := range v.Group() {
			if i > 0 {
				b = append(b, ',')
			}
			b = jsonscan.AppendString(b, a.Key)
			b = append(b, ':')
			b = appendValue(b, a.Value)
		}
		return append(b, '}')
	}
	if err, ok := v.Any().(error); ok {
		return jsonscan.AppendString(b, err.Error())
	}
	j, err := json.Marshal(v.Any())
	if err != nil {
		return jsonscan.AppendString(b, "!"+err.Error())
	}
	return append(b, j...)
}

// appendFloat appends f as encoding/json does (shortest form, exponent
// only outside [1e-6, 1e21)); NaN and infinities, which JSON cannot hold,
// as strings.
func appendFloat(b []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return jsonscan.AppendString(b, strconv.FormatFloat(f, 'g', -1, 64))
	}
	abs := math.Abs(f)
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		b = strconv.AppendFloat(b, f, 'e', -1, 64)
		// e-07 -> e-7, as encoding/json
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
		return b
	}
	return strconv.AppendFloat(b, f, 'f', -1, 64)
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
