package logprovider

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/autopush-go/autopush/sender/provider"
)

// Name is the provider's name in storage, metrics and GET /push answers.
const Name = "log"

// Config of the log provider; the settings package fills it (flag
// -log-provider-file, variable PREFIX__LOG_PROVIDER_FILE).
type Config struct {
	// File is where notifications are recorded, one JSON object a line,
	// appended (made mode 0600 when missing). When set, the log provider
	// is the one POST /push sends through, in place of Swrve. Default ""
	// (no log provider).
	File string `conf:"log-provider-file" help:"record pushes as JSON lines in this file instead of sending them; set, it is the provider of POST /push"`
}

// The log provider's limits: a file takes far more than a push service,
// but the pushes still go through the sender's pacing, at 1,000 a second.
const (
	rate  = 1100
	delay = time.Millisecond
)

// Limits are what the sender drives the provider with.
func (c *Config) Limits() provider.Limits {
	return provider.Limits{Rate: rate, Delay: delay, AverageLatency: delay, Timeout: 5 * time.Second}
}

// Line is one recorded notification, as the file holds it.
type Line struct {
	// Time is when it was recorded (RFC 3339, UTC, milliseconds).
	Time string `json:"time"`
	// ID is the push's id (GET /push/{id}).
	ID                  string `json:"id"`
	Platform            string `json:"platform"`
	MessagePrototypeKey string `json:"messagePrototypeKey"`
	PushKey             string `json:"pushKey"`
	Message             string `json:"message"`
}

// Provider records notifications in a file. Safe for concurrent use.
type Provider struct {
	cfg Config
	mu  sync.Mutex
	f   *os.File
}

var _ provider.Provider = (*Provider)(nil)

// New opens (or makes, with its directory) the file for appending.
func New(cfg Config) (*Provider, error) {
	if cfg.File == "" {
		return nil, fmt.Errorf("logprovider: log-provider-file is empty")
	}
	if err := os.MkdirAll(filepath.Dir(cfg.File), 0o700); err != nil {
		return nil, fmt.Errorf("logprovider: log-provider-file: %w", err)
	}
	f, err := os.OpenFile(cfg.File, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("logprovider: log-provider-file: %w", err)
	}
	return &Provider{cfg: cfg, f: f}, nil
}

// Name implements provider.Provider.
func (p *Provider) Name() string { return Name }

// Limits implements provider.Provider.
func (p *Provider) Limits() provider.Limits { return p.cfg.Limits() }

// File is the file it records to.
func (p *Provider) File() string { return p.cfg.File }

// Send implements provider.Provider: the notification is appended as one
// line, written by a single write (not synced: a development record, not
// a store). A failed write is retried later, as a push service's
// unanswered call would be.
func (p *Provider) Send(_ context.Context, n *provider.Notification) provider.Result {
	b, err := json.Marshal(Line{Time: time.Now().UTC().Format("2006-01-02T15:04:05.000Z07:00"), ID: n.ID, Platform: n.Platform,
		MessagePrototypeKey: n.PrototypeKey, PushKey: n.Token, Message: n.Message})
	if err != nil {
		return provider.Result{Verdict: provider.Broken, Err: fmt.Errorf("logprovider: %w", err), Message: err.Error()}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, err := p.f.Write(append(b, '\n')); err != nil {
		return provider.Result{Verdict: provider.Retry, Err: fmt.Errorf("logprovider: write %s: %w", p.cfg.File, err), Message: err.Error()}
	}
	return provider.Result{Verdict: provider.Sent}
}

// Close closes the file; a Send after it fails (and is retried).
func (p *Provider) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.f.Close()
}
