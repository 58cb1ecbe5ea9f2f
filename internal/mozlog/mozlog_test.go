package mozlog

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestMozLogLine(t *testing.T) {
	var b bytes.Buffer
	log := New(&b, "autoconnect", "info")
	log.Debug("hidden")
	log.With("node", "n1").Warn("storage slow", "error", errors.New("timeout"), "ms", 12)
	var m map[string]any
	if err := json.Unmarshal(b.Bytes(), &m); err != nil {
		t.Fatalf("not one JSON line: %q", b.String())
	}
	f := m["Fields"].(map[string]any)
	if m["Logger"] != "autoconnect" || m["Severity"] != 4.0 || m["EnvVersion"] != "2.0" || m["Timestamp"] == nil ||
		f["msg"] != "storage slow" || f["error"] != "timeout" || f["node"] != "n1" || f["ms"] != 12.0 {
		t.Fatalf("line %v", m)
	}
}

// oldLine is the line encoding/json made of the same record (a map, keys
// sorted): the format operators' pipelines parse, which the hand-written
// encoder keeps.
func oldFields(attrs []slog.Attr, msg string) map[string]any {
	f := map[string]any{}
	for _, a := range attrs {
		v := a.Value.Resolve().Any()
		if err, ok := v.(error); ok {
			v = err.Error()
		}
		f[a.Key] = v
	}
	f["msg"] = msg
	b, _ := json.Marshal(f)
	var m map[string]any
	json.Unmarshal(b, &m)
	return m
}

func TestFieldsAsEncodingJSON(t *testing.T) {
	when := time.Date(2026, 11, 27, 17, 0, 0, 123456789, time.UTC)
	attrs := []slog.Attr{
		slog.String("route", "wpush_v2"), slog.String("odd", "quote\" back\\ <tag> & \u2028 \x01 \xff"),
		slog.Int("code", -201), slog.Uint64("big", 1<<63+5), slog.Float64("ms", 0.125), slog.Float64("tiny", 1.5e-9),
		slog.Float64("huge", 3e25), slog.Float64("zero", 0), slog.Bool("vapid", true), slog.Duration("took", 1500*time.Millisecond),
		slog.Time("at", when), slog.Any("err", errors.New("storage: timeout")), slog.Any("list", []int{1, 2}),
		slog.Any("nil", nil), slog.String("code", "replaced"), // a key twice: the last value
	}
	var b bytes.Buffer
	New(&b, "autoendpoint", "debug").LogAttrs(context.Background(), slog.LevelInfo, "request", attrs...)
	if !bytes.HasSuffix(b.Bytes(), []byte("}\n")) || bytes.Count(b.Bytes(), []byte("\n")) != 1 {
		t.Fatalf("not one line: %q", b.String())
	}
	var m map[string]any
	if err := json.Unmarshal(b.Bytes(), &m); err != nil {
		t.Fatalf("not JSON: %v: %s", err, b.String())
	}
	got, want := m["Fields"].(map[string]any), oldFields(attrs, "request")
	if !reflect.DeepEqual(got, want) {
		t.Errorf("fields\n got %v\nwant %v", got, want)
	}
	if m["Type"] != "autoendpoint.log" || m["Severity"] != 6.0 || m["Pid"] == nil || m["Hostname"] == nil {
		t.Errorf("envelope %v", m)
	}
	// Keys sorted, as encoding/json wrote the map.
	line := b.String()
	if i, j := strings.Index(line, `"at":`), strings.Index(line, `"zero":`); i < 0 || j < i {
		t.Errorf("fields not sorted: %s", line)
	}
	if !strings.Contains(line, `"tiny":1.5e-9`) || !strings.Contains(line, `"huge":3e+25`) || !strings.Contains(line, `"took":1500000000`) {
		t.Errorf("numbers not as encoding/json writes them: %s", line)
	}
}

func FuzzLine(f *testing.F) {
	f.Add("k", "v", int64(1), 0.5)
	f.Add("\xff\"", "\x00<>&\u2029", int64(-1), 1e300)
	f.Fuzz(func(t *testing.T, k, v string, n int64, x float64) {
		var b bytes.Buffer
		New(&b, "fuzz", "info").Info(v, k, v, "n", n, "x", x)
		var m map[string]any
		if err := json.Unmarshal(b.Bytes(), &m); err != nil {
			t.Fatalf("not JSON: %v: %q", err, b.String())
		}
		if _, ok := m["Fields"].(map[string]any); !ok {
			t.Fatalf("no Fields: %q", b.String())
		}
	})
}

func BenchmarkRequestLine(b *testing.B) {
	log := New(io.Discard, "autoendpoint", "info")
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		log.LogAttrs(ctx, slog.LevelInfo, "request", slog.String("method", "POST"), slog.String("route", "wpush_v2"),
			slog.Int("code", 201), slog.Float64("ms", 0.412), slog.String("remote", "127.0.0.2:40000"),
			slog.String("outcome", "direct"), slog.Int("data_len", 512), slog.String("encoding", "aes128gcm"), slog.Bool("vapid", true))
	}
}
