package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/autopush-go/autopush/internal/pushcrypto"
	"github.com/autopush-go/autopush/internal/receiptwire"
)

// Delivery receipts (docs/receipts.md): send -receipt creates a receipt
// subscription at the endpoint's origin, pushes with Push-Receipt naming
// it, and long-polls it until the push's receipt comes.

// receipt is one receipt as GET /receipts/{id} returns it.
type receipt struct{ receiptwire.Receipt }

// receiptSub talks to one receipt subscription with one VAPID key.
type receiptSub struct {
	origin string // the push endpoint's: the receipts' home and VAPID aud
	signer *pushcrypto.VAPIDSigner
	sub    string // the subscription's URL, once created
}

func newReceipts(endpoint string, signer *pushcrypto.VAPIDSigner) (*receiptSub, error) {
	if signer == nil {
		return nil, usageErr("-receipt needs -vapid-private: receipts belong to a VAPID key")
	}
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		return nil, usageErr("endpoint %q is not an http(s) URL", endpoint)
	}
	return &receiptSub{origin: strings.ToLower(u.Scheme + "://" + u.Host), signer: signer}, nil
}

// call makes one VAPID-signed request and decodes a JSON answer into out
// (nil: none expected); want is the status it must have.
func (r *receiptSub) call(ctx context.Context, method, u string, body []byte, want int, out any) (*http.Response, error) {
	auth, err := vapidAuthorization(r.signer, r.origin, time.Now())
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", auth)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode == http.StatusTooManyRequests {
		after, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
		return nil, busyError{after: time.Duration(max(after, 1)) * time.Second, body: string(bytes.TrimSpace(b))}
	}
	if resp.StatusCode != want {
		return nil, fmt.Errorf("%s %s: %d %s", method, u, resp.StatusCode, bytes.TrimSpace(b))
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return nil, fmt.Errorf("%s %s: %w", method, u, err)
		}
	}
	return resp, nil
}

// busyError is a 429: the node has as many receipt reads waiting as it
// keeps (receipt-max-waiting); read again after Retry-After.
type busyError struct {
	after time.Duration
	body  string
}

func (e busyError) Error() string { return fmt.Sprintf("429 (again in %v) %s", e.after, e.body) }

// subscribe creates the receipt subscription (POST /receipts).
func (r *receiptSub) subscribe(ctx context.Context) error {
	resp, err := r.call(ctx, http.MethodPost, r.origin+"/receipts", nil, http.StatusCreated, nil)
	if err != nil {
		return fmt.Errorf("receipt subscription (is receipts on?): %w", err)
	}
	r.sub = resp.Header.Get("Location")
	if r.sub == "" {
		return fmt.Errorf("receipt subscription: no Location")
	}
	return nil
}

// await long-polls the subscription until the receipt of the push at
// location comes.
func (r *receiptSub) await(ctx context.Context, location string) (receipt, error) {
	got, err := r.awaitAll(ctx, []string{location})
	return got[location], err
}

// awaitAll long-polls the subscription until the receipts of the pushes
// at locations came, acknowledging every receipt it reads (this
// subscription is pushsend's own). A 429 (too many reads waiting on the
// node) is read again after its Retry-After. On an error it returns the
// receipts it had.
func (r *receiptSub) awaitAll(ctx context.Context, locations []string) (map[string]receipt, error) {
	want := map[string]bool{}
	for _, l := range locations {
		want[l] = true
	}
	got := map[string]receipt{}
	for len(got) < len(want) {
		var page struct{ Receipts []receipt }
		_, err := r.call(ctx, http.MethodGet, r.sub+"?wait=25", nil, http.StatusOK, &page)
		var busy busyError
		if errors.As(err, &busy) {
			select {
			case <-ctx.Done():
				return got, fmt.Errorf("%d receipts of %d: %w", len(got), len(want), ctx.Err())
			case <-time.After(busy.after):
				continue
			}
		}
		if err != nil {
			return got, err
		}
		var ids []string
		for _, rc := range page.Receipts {
			ids = append(ids, rc.ID)
			if want[rc.Location] {
				got[rc.Location] = rc
			}
		}
		if len(ids) > 0 {
			body, _ := json.Marshal(map[string][]string{"ids": ids})
			if _, err := r.call(ctx, http.MethodPost, r.sub+"/ack", body, http.StatusNoContent, nil); err != nil {
				return got, err
			}
		}
		if err := ctx.Err(); err != nil && len(got) < len(want) {
			return got, fmt.Errorf("%d receipts of %d: %w", len(got), len(want), err)
		}
	}
	return got, nil
}

// print writes the receipt, as JSON or one line.
func (rc receipt) print(w io.Writer, asJSON bool) {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.Encode(map[string]any{"receipt": rc})
		return
	}
	what := rc.State
	if rc.Reason != "" {
		what += " (" + rc.Reason + ")"
	}
	fmt.Fprintf(w, "receipt: %s at %s\n", what, time.UnixMilli(rc.At).UTC().Format(time.RFC3339Nano))
}

// err is nil for a receipt that says the push reached its user agent, or
// (a bridged one) its provider.
func (rc receipt) err() error {
	if rc.Delivered || rc.State == "bridge_transmitted" {
		return nil
	}
	return fmt.Errorf("not delivered: %s %s", rc.State, rc.Reason)
}
