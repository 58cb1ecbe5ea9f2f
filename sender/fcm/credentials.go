package fcm

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/jwt"
)

// Scope is the OAuth2 scope FCM's send API asks for.
const Scope = "https://www.googleapis.com/auth/firebase.messaging"

// maxCredentials bounds a service-account file: real ones are ~2.3 KB.
const maxCredentials = 1 << 20

// serviceAccount is the part of a Google service-account key file that
// minting a token needs.
type serviceAccount struct {
	Type         string `json:"type"`
	ClientEmail  string `json:"client_email"`
	PrivateKey   string `json:"private_key"`
	PrivateKeyID string `json:"private_key_id"`
	TokenURI     string `json:"token_uri"`
}

// loadServiceAccount reads an app's credentials (a file, or the JSON
// itself) into a JWT-bearer config. Its errors never quote the secret.
func loadServiceAccount(creds string) (*jwt.Config, error) {
	b := []byte(creds)
	if !strings.HasPrefix(strings.TrimSpace(creds), "{") {
		fi, err := os.Stat(creds)
		if errors.Is(err, fs.ErrNotExist) {
			// Not quoted: it may be a legacy GCM server key, a secret.
			return nil, errors.New("credentials are neither JSON (starting with '{') nor the path of an existing file")
		}
		if err != nil {
			return nil, fmt.Errorf("service-account file: %w", err)
		}
		if fi.Size() > maxCredentials {
			return nil, fmt.Errorf("service-account file %s: %d bytes is not a service-account key", creds, fi.Size())
		}
		if b, err = os.ReadFile(creds); err != nil {
			return nil, fmt.Errorf("service-account file: %w", err)
		}
	}
	var sa serviceAccount
	if err := json.Unmarshal(b, &sa); err != nil {
		// Only the error's kind: its text could quote part of the key.
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return nil, fmt.Errorf("service account: not JSON (syntax error at byte %d)", se.Offset)
		}
		return nil, errors.New("service account: not a service-account JSON object")
	}
	switch {
	case sa.Type != "service_account":
		return nil, fmt.Errorf("service account: type %q, want \"service_account\"", sa.Type)
	case sa.ClientEmail == "":
		return nil, errors.New("service account: no client_email")
	case sa.PrivateKey == "":
		return nil, errors.New("service account: no private_key")
	}
	u, err := url.Parse(sa.TokenURI)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("service account: token_uri %q is not an absolute http(s) URL", sa.TokenURI)
	}
	if err := checkKey(sa.PrivateKey); err != nil {
		return nil, fmt.Errorf("service account %s: private_key: %w", sa.ClientEmail, err)
	}
	return &jwt.Config{
		Email: sa.ClientEmail, PrivateKey: []byte(sa.PrivateKey), PrivateKeyID: sa.PrivateKeyID,
		Scopes: []string{Scope}, TokenURL: sa.TokenURI,
	}, nil
}

// checkKey parses the key now, so a bad one stops the start instead of
// failing every send; the error never includes the key.
func checkKey(k string) error {
	blk, _ := pem.Decode([]byte(k))
	if blk == nil {
		return errors.New("not a PEM block")
	}
	if _, err := x509.ParsePKCS8PrivateKey(blk.Bytes); err == nil {
		return nil
	}
	if _, err := x509.ParsePKCS1PrivateKey(blk.Bytes); err == nil {
		return nil
	}
	return errors.New("not an RSA private key (PKCS#8 or PKCS#1)")
}

// tokens caches one app's access token. Unlike oauth2.ReuseTokenSource it
// can drop a token FCM refused (401) and lets a waiting send give up at
// its deadline, while one fetch serves every send that waits for it.
// Safe for concurrent use.
type tokens struct {
	fetch func() (*oauth2.Token, error)
	now   func() time.Time

	mu        sync.Mutex
	tok       *oauth2.Token
	refreshAt time.Time
	flight    *flight
}

type flight struct {
	done chan struct{}
	tok  *oauth2.Token
	err  error
}

// newTokens fetches with conf through client (whose timeouts bound a
// fetch: the JWT source does not take a request context).
func newTokens(conf *jwt.Config, client *http.Client) *tokens {
	ctx := context.WithValue(context.Background(), oauth2.HTTPClient, client)
	return &tokens{
		// A fresh source per fetch: the cache is ours.
		fetch: func() (*oauth2.Token, error) { return conf.TokenSource(ctx).Token() },
		now:   time.Now,
	}
}

// get returns a token valid for a while yet, fetching one if needed.
func (t *tokens) get(ctx context.Context) (string, error) {
	t.mu.Lock()
	if t.tok != nil && t.now().Before(t.refreshAt) {
		s := t.tok.AccessToken
		t.mu.Unlock()
		return s, nil
	}
	f := t.flight
	if f == nil {
		f = &flight{done: make(chan struct{})}
		t.flight = f
		go t.run(f)
	}
	t.mu.Unlock()
	select {
	case <-f.done:
		if f.err != nil {
			return "", f.err
		}
		return f.tok.AccessToken, nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

func (t *tokens) run(f *flight) {
	tok, err := t.fetch()
	if err == nil && (tok == nil || tok.AccessToken == "") {
		err = errors.New("token endpoint answered no access_token")
	}
	t.mu.Lock()
	if err == nil {
		t.tok, t.refreshAt = tok, refreshTime(tok.Expiry, t.now())
	}
	t.flight = nil
	t.mu.Unlock()
	f.tok, f.err = tok, err
	close(f.done)
}

// refreshTime is when a token fetched at now is renewed: a minute before
// it expires, or a quarter of its lifetime for short ones, so a send
// never goes out with a token about to lapse. A token without expiry is
// renewed after five minutes.
func refreshTime(expiry, now time.Time) time.Time {
	if expiry.IsZero() {
		return now.Add(5 * time.Minute)
	}
	life := expiry.Sub(now)
	return expiry.Add(-min(time.Minute, life/4))
}

// invalidate drops the cached token if it is still bad, so the next send
// fetches a new one (and many sends refused at once fetch once).
func (t *tokens) invalidate(bad string) {
	t.mu.Lock()
	if t.tok != nil && t.tok.AccessToken == bad {
		t.tok = nil
	}
	t.mu.Unlock()
}
