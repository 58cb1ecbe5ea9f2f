package apns

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// tokenLifetime is how long a provider token is reused. Apple rejects
// one older than an hour (ExpiredProviderToken) and a refresh more often
// than every 20 minutes (TooManyProviderTokenUpdates); 50 minutes leaves
// room for clock skew on both sides.
const tokenLifetime = 50 * time.Minute

// maxPEM bounds a key or certificate file: a .p8 is a few hundred bytes,
// a certificate chain a few KiB.
const maxPEM = 1 << 20

// readPEM reads a setting that is a path, or the PEM itself when it starts
// with '-' (autopush-rs's convention). Errors name the path, never the
// content.
func readPEM(v string) ([]byte, error) {
	if strings.HasPrefix(v, "-") {
		return []byte(v), nil
	}
	f, err := os.Open(v)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxPEM+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", v, err)
	}
	if len(b) > maxPEM {
		return nil, fmt.Errorf("%s is larger than %d bytes: not a key or certificate", v, maxPEM)
	}
	return b, nil
}

// ParseSigningKey reads an APNs signing key: PEM "PRIVATE KEY" (the .p8
// Apple issues, PKCS#8) or "EC PRIVATE KEY" (SEC 1), on curve P-256.
// Errors never quote the key.
func ParseSigningKey(b []byte) (*ecdsa.PrivateKey, error) {
	blk, _ := pem.Decode(b)
	if blk == nil {
		return nil, errors.New("no PEM block (want a .p8 \"PRIVATE KEY\")")
	}
	var key any
	var err error
	switch blk.Type {
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(blk.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(blk.Bytes)
	default:
		return nil, fmt.Errorf("PEM block %q is not a private key", blk.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("not a valid private key: %w", err)
	}
	ec, ok := key.(*ecdsa.PrivateKey)
	if !ok || ec.Curve != elliptic.P256() {
		return nil, errors.New("not an EC P-256 key (APNs signs with ES256)")
	}
	return ec, nil
}

// loadCertificate reads a client certificate and its key, rejecting one
// that has expired (APNs would refuse every send).
func loadCertificate(cert, key string, now time.Time) (tls.Certificate, error) {
	cb, err := readPEM(cert)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("cert: %w", err)
	}
	kb, err := readPEM(key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("cert_key: %w", err)
	}
	c, err := tls.X509KeyPair(cb, kb)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("cert and cert_key: %w", err)
	}
	if c.Leaf != nil && now.After(c.Leaf.NotAfter) {
		return tls.Certificate{}, fmt.Errorf("cert expired on %s", c.Leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	return c, nil
}

// tokenSource makes the app's provider token and reuses it for
// tokenLifetime. Safe for concurrent use.
type tokenSource struct {
	key     *ecdsa.PrivateKey
	kid     string
	iss     string
	mu      sync.Mutex
	tok     string
	issued  time.Time
	refresh int // tokens made, for tests and metrics
}

// token returns the token in use, making a new one when there is none or
// it is tokenLifetime old.
func (s *tokenSource) token(now time.Time) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tok != "" && now.Sub(s.issued) < tokenLifetime {
		return s.tok, nil
	}
	t := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims{"iss": s.iss, "iat": now.Unix()})
	// Apple's header is exactly {alg, kid}.
	t.Header = map[string]any{"alg": "ES256", "kid": s.kid}
	tok, err := t.SignedString(s.key)
	if err != nil {
		return "", fmt.Errorf("sign provider token: %w", err)
	}
	s.tok, s.issued = tok, now
	s.refresh++
	return tok, nil
}

// expire drops tok if it is still the one in use (APNs answered
// ExpiredProviderToken): concurrent sends that saw the same answer make
// one new token between them, not one each.
func (s *tokenSource) expire(tok string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tok == tok {
		s.tok = ""
	}
}
