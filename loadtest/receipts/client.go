package receipts

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/autopush-go/autopush/apitier/tracking"
	"github.com/autopush-go/autopush/internal/pushcrypto"
	"github.com/autopush-go/autopush/internal/receiptwire"
	"github.com/autopush-go/autopush/loadtest/appserver"
)

// Client is the application server's side of receipts: the run's VAPID
// key, its receipt subscriptions, every receipt read. Goroutine-safe.
type Client struct {
	endpoint string // the endpoint's URL (scheme://host:port)
	signer   *pushcrypto.VAPIDSigner
	http     *http.Client

	mu   sync.Mutex
	subs []string
	got  map[string]receiptwire.Receipt // by receipt id
	errs map[string]int64
}

// Page bounds: receipts per GET (the API's most), and a following GET's
// wait, seconds: short enough that a stopped Follow's last GET is not
// missed for long, long enough that an idle subscription costs a request
// every few seconds.
const (
	pageLimit  = 1000
	followWait = 5
)

// New is a client of the endpoint at endpointURL, signing with signer.
func New(endpointURL string, signer *pushcrypto.VAPIDSigner) *Client {
	return &Client{endpoint: strings.TrimRight(endpointURL, "/"), signer: signer,
		http: &http.Client{Timeout: time.Duration(followWait+30) * time.Second},
		got:  map[string]receiptwire.Receipt{}, errs: map[string]int64{}}
}

// authorization is a freshly signed VAPID header for the endpoint.
func (c *Client) authorization() (string, error) {
	u, err := url.Parse(c.endpoint)
	if err != nil {
		return "", err
	}
	tok, err := c.signer.Token(u.Scheme+"://"+u.Host, time.Now().Add(12*time.Hour))
	if err != nil {
		return "", err
	}
	return c.signer.Authorization(tok), nil
}

// do sends one request with the VAPID header; it returns the status and
// the body.
func (c *Client) do(ctx context.Context, method, u string, body []byte) (int, []byte, error) {
	auth, err := c.authorization()
	if err != nil {
		return 0, nil, err
	}
	req, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", auth)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// Subscribe creates a receipt subscription (POST /receipts) and returns
// its URL, for Push-Receipt.
func (c *Client) Subscribe(ctx context.Context) (string, error) {
	status, body, err := c.do(ctx, http.MethodPost, c.endpoint+"/receipts", nil)
	if err != nil {
		return "", fmt.Errorf("loadtest: receipts: subscribe: %w", err)
	}
	var sub receiptwire.Subscription
	if status != http.StatusCreated || json.Unmarshal(body, &sub) != nil || sub.Receipts == "" {
		return "", fmt.Errorf("loadtest: receipts: subscribe: %d %s", status, body)
	}
	c.mu.Lock()
	c.subs = append(c.subs, sub.Receipts)
	c.mu.Unlock()
	return sub.Receipts, nil
}

// page reads one page of sub (waiting up to wait seconds for one),
// records its receipts and acks them; it returns how many came.
func (c *Client) page(ctx context.Context, sub string, wait int) (int, error) {
	status, body, err := c.do(ctx, http.MethodGet, fmt.Sprintf("%s?wait=%d&limit=%d", sub, wait, pageLimit), nil)
	if err != nil {
		return 0, err
	}
	var got receiptwire.List
	if status != http.StatusOK {
		return 0, fmt.Errorf("GET: %s", appserver.StatusReason(status, body))
	}
	if err := json.Unmarshal(body, &got); err != nil {
		return 0, fmt.Errorf("GET: %w", err)
	}
	if len(got.Receipts) == 0 {
		return 0, nil
	}
	ids := make([]string, len(got.Receipts))
	c.mu.Lock()
	for i, r := range got.Receipts {
		// A receipt read again (its ack lost) is the same receipt.
		c.got[r.ID] = r
		ids[i] = r.ID
	}
	c.mu.Unlock()
	ack, _ := json.Marshal(receiptwire.Ack{IDs: ids})
	status, body, err = c.do(ctx, http.MethodPost, sub+"/ack", ack)
	switch {
	case err != nil:
		return 0, fmt.Errorf("ack: %w", err)
	case status != http.StatusNoContent:
		return 0, fmt.Errorf("ack: %s", appserver.StatusReason(status, body))
	}
	return len(got.Receipts), nil
}

// Follow reads every subscription with long-polling GETs, acking what it
// reads, until the returned stop is called; stop returns once every
// reader has. A failed GET or ack is counted and tried again: the
// receipts it would have read stay until acked.
func (c *Client) Follow(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	c.mu.Lock()
	subs := append([]string(nil), c.subs...)
	c.mu.Unlock()
	for _, sub := range subs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if _, err := c.page(ctx, sub, followWait); err != nil && ctx.Err() == nil {
					c.failed(err)
					// Not a busy loop against a failing endpoint.
					select {
					case <-ctx.Done():
					case <-time.After(100 * time.Millisecond):
					}
				}
			}
		}()
	}
	return func() {
		cancel()
		wg.Wait()
	}
}

// drainAttempts bounds Drain's failed reads of one subscription.
const drainAttempts = 5

// Drain reads every subscription without waiting until each answers
// none: every receipt written so far is then read and acked.
func (c *Client) Drain(ctx context.Context) error {
	c.mu.Lock()
	subs := append([]string(nil), c.subs...)
	c.mu.Unlock()
	for _, sub := range subs {
		fails := 0
		for {
			n, err := c.page(ctx, sub, 0)
			if err != nil {
				c.failed(err)
				if fails++; fails == drainAttempts || ctx.Err() != nil {
					return fmt.Errorf("loadtest: receipts: drain %s: %w", sub, err)
				}
				continue
			}
			if n == 0 {
				break
			}
		}
	}
	return nil
}

func (c *Client) failed(err error) {
	c.mu.Lock()
	c.errs[appserver.TransportReason(err)]++
	c.mu.Unlock()
}

// Receipts are the distinct receipts read so far.
func (c *Client) Receipts() []receiptwire.Receipt {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]receiptwire.Receipt, 0, len(c.got))
	for _, r := range c.got {
		out = append(out, r)
	}
	return out
}

// Subscriptions is how many subscriptions Subscribe made.
func (c *Client) Subscriptions() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.subs)
}

// Errors are the failed reads so far, by cause.
func (c *Client) Errors() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.errs)
}

// ReadMilestones reads GET /__milestones__ at u.
func ReadMilestones(ctx context.Context, u string) (tracking.Milestones, error) {
	var m tracking.Milestones
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return m, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return m, fmt.Errorf("loadtest: milestones: %w", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return m, fmt.Errorf("loadtest: milestones: %d %s", resp.StatusCode, b)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("loadtest: milestones: %w", err)
	}
	return m, nil
}

// AwaitSettled reads the milestones at u until every tracked push the
// service took is settled and it took at least want (terminal =
// received >= want), or until deadline; it returns the last reading,
// and an error only when none could be made.
func AwaitSettled(ctx context.Context, u string, want int64, deadline time.Time) (tracking.Milestones, error) {
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last tracking.Milestones
	var lastErr error
	read := false
	for {
		m, err := ReadMilestones(ctx, u)
		if err == nil {
			last, read = m, true
			if Received(&m) >= want && m.Terminal == Received(&m) {
				return m, nil
			}
		} else if ctx.Err() == nil {
			lastErr = err
		}
		select {
		case <-ctx.Done():
			if !read {
				return last, errors.Join(lastErr, ctx.Err())
			}
			return last, nil
		case <-tick.C:
		}
	}
}
