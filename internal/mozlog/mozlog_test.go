package mozlog

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
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
