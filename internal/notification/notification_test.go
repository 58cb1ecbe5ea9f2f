package notification

import (
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/autopush-go/autopush/internal/protocol"
	"github.com/autopush-go/autopush/storage"
)

func TestMessageConversion(t *testing.T) {
	chid := uuid.New()
	n := protocol.Notification{ChannelID: chid.String(), Version: "v", TTL: 30, Topic: "weather", Timestamp: 1700000000,
		SortKey: uint64(time.Unix(1700000000, 5).UnixNano()), Data: "ZGF0YQ",
		Headers: []protocol.Header{{Name: "encoding", Value: "aesgcm"}, {Name: "crypto_key", Value: "dh=x"}}}
	m := ToMessage(&n)
	if m.CHID != chid || m.Version != "v" || m.TTL != 30 || m.Topic != "weather" || m.SortKey != n.SortKey ||
		m.Data != "ZGF0YQ" || m.Headers["crypto_key"] != "dh=x" || len(m.Headers) != 2 {
		t.Fatalf("ToMessage: %+v", m)
	}
	back := FromMessage(&m, nil)
	if back.ChannelID != n.ChannelID || back.Version != "v" || back.Timestamp != 1700000000 || len(back.Headers) != 2 || back.SortKey != n.SortKey {
		t.Fatalf("FromMessage: %+v", back)
	}
	// A sender that set no sort key gets one: storing needs it.
	n.SortKey = 0
	before := storage.NewSortKey()
	if m := ToMessage(&n); m.SortKey < before {
		t.Fatalf("sort key %d, want a fresh one (>= %d)", m.SortKey, before)
	}
}
