package engine_test

import (
	"testing"
	"time"

	"github.com/autopush-go/autopush/engine"
	et "github.com/autopush-go/autopush/engine/enginetest"
)

// TestConfigValidateBroadcasts: the broadcast and message-limit settings
// fail fast with a clear message.
func TestConfigValidateBroadcasts(t *testing.T) {
	for name, mutate := range map[string]func(*engine.Config){
		"negative msg-limit":    func(c *engine.Config) { c.MsgLimit = -1 },
		"poll too often":        func(c *engine.Config) { c.MegaphonePollInterval = time.Millisecond },
		"no batch":              func(c *engine.Config) { c.BroadcastBatch = 0 },
		"megaphone not a URL":   func(c *engine.Config) { c.MegaphoneAPIURL = "megaphone.example.com/v1/broadcasts" },
		"megaphone not http(s)": func(c *engine.Config) { c.MegaphoneAPIURL = "ftp://megaphone.example.com/" },
	} {
		cfg := et.Config()
		mutate(&cfg)
		if err := cfg.Validate(); err == nil {
			t.Errorf("%s: Validate accepted it", name)
		}
	}
	cfg := et.Config()
	cfg.MsgLimit, cfg.MegaphoneAPIURL = 0, "https://megaphone.example.com/v1/broadcasts"
	et.Must(t, cfg.Validate(), "msg-limit 0 and an https Megaphone")
	if d := engine.DefaultConfig(); d.MsgLimit != 150 || d.MegaphonePollInterval != 30*time.Second || d.MegaphoneAPIURL != "" {
		t.Errorf("defaults: msg-limit %d, poll %s, url %q; want the reference's 150 and 30s, and storage", d.MsgLimit,
			d.MegaphonePollInterval, d.MegaphoneAPIURL)
	}
}
