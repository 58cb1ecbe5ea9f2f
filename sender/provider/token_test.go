package provider

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
)

// HideToken hides the token as it is and escaped for a URL's path or
// query, and nothing else.
func TestHideToken(t *testing.T) {
	token := "ab/c d+e%f:g"
	text := fmt.Sprintf("raw %s path %s query %s tail", token, url.PathEscape(token), url.QueryEscape(token))
	got := HideToken(text, token, "X")
	if got != "raw X path X query X tail" {
		t.Errorf("HideToken: %q", got)
	}
	if got := HideToken("nothing to hide", "", "X"); got != "nothing to hide" {
		t.Errorf("an empty token: %q", got)
	}
}

// WithoutToken hides the token in every text of a result, and the error
// it wraps still matches.
func TestWithoutToken(t *testing.T) {
	token := "0123456789abcdef"
	err := fmt.Errorf("send: Post %q: %w", "https://h/3/device/"+token, context.DeadlineExceeded)
	r := Result{Verdict: Retry, Reason: "r " + token, Message: "m " + token, Err: err}.WithoutToken(token)
	for _, text := range []string{r.Reason, r.Message, r.Err.Error()} {
		if strings.Contains(text, token) || !strings.Contains(text, RedactedToken) {
			t.Errorf("%q: the token is not hidden", text)
		}
	}
	if !errors.Is(r.Err, context.DeadlineExceeded) || TransportMessage(r.Err) != "timeout" {
		t.Errorf("the hidden error %v no longer matches what it wraps", r.Err)
	}
	plain := errors.New("no token here")
	if r := (Result{Err: plain}).WithoutToken(token); r.Err != plain {
		t.Errorf("an error without the token was replaced: %v", r.Err)
	}
}
