package pushcrypto

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// VAPIDSigner is the application server's side of RFC 8292: it holds a
// P-256 key and signs the JWT a push carries. The load tester and the
// operator's push CLI send with it; the service itself only verifies.
type VAPIDSigner struct {
	key *ecdsa.PrivateKey
	// Public is the uncompressed public point, base64url without
	// padding: the k= parameter and a subscription's applicationServerKey.
	Public string
	// Subject is the sub claim (mailto: or https:); empty omits it.
	Subject string
}

// NewVAPIDSigner makes a signer with a fresh key.
func NewVAPIDSigner(subject string) (*VAPIDSigner, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("pushcrypto: VAPID key: %w", err)
	}
	return signerFrom(k, subject)
}

// ParseVAPIDSigner loads a signer from the private scalar, base64url (the
// form web-push's generateVAPIDKeys prints as privateKey).
func ParseVAPIDSigner(private, subject string) (*VAPIDSigner, error) {
	d, err := base64.RawURLEncoding.DecodeString(trimPad(private))
	if err != nil || len(d) != 32 {
		return nil, errors.New("pushcrypto: VAPID private key must be 32 bytes of base64url")
	}
	k, err := ecdsa.ParseRawPrivateKey(elliptic.P256(), d)
	if err != nil {
		return nil, fmt.Errorf("pushcrypto: VAPID private key: %w", err)
	}
	return signerFrom(k, subject)
}

func signerFrom(k *ecdsa.PrivateKey, subject string) (*VAPIDSigner, error) {
	ek, err := k.ECDH()
	if err != nil {
		return nil, fmt.Errorf("pushcrypto: VAPID key: %w", err)
	}
	return &VAPIDSigner{
		key:     k,
		Public:  base64.RawURLEncoding.EncodeToString(ek.PublicKey().Bytes()),
		Subject: subject,
	}, nil
}

// Private is the private scalar, base64url without padding.
func (s *VAPIDSigner) Private() string {
	d, _ := s.key.Bytes() // a P-256 key always encodes
	return base64.RawURLEncoding.EncodeToString(d)
}

// PublicKey is the raw uncompressed public point (65 bytes).
func (s *VAPIDSigner) PublicKey() []byte {
	b, _ := base64.RawURLEncoding.DecodeString(s.Public)
	return b
}

// Token signs a JWT for audience (the push service's origin, e.g.
// "https://push.example.com") that expires at exp. A sender reuses one
// token for many pushes until shortly before exp; the service caches it.
func (s *VAPIDSigner) Token(audience string, exp time.Time) (string, error) {
	const header = `{"typ":"JWT","alg":"ES256"}`
	claims := `{"aud":` + strconv.Quote(audience) + `,"exp":` + strconv.FormatInt(exp.Unix(), 10)
	if s.Subject != "" {
		claims += `,"sub":` + strconv.Quote(s.Subject)
	}
	claims += "}"
	enc := base64.RawURLEncoding
	signing := enc.EncodeToString([]byte(header)) + "." + enc.EncodeToString([]byte(claims))
	sum := sha256.Sum256([]byte(signing))
	r, sv, err := ecdsa.Sign(rand.Reader, s.key, sum[:])
	if err != nil {
		return "", fmt.Errorf("pushcrypto: VAPID sign: %w", err)
	}
	// JWS ES256 wants r||s, 32 bytes each, not ASN.1.
	sig := make([]byte, 64)
	r.FillBytes(sig[:32])
	sv.FillBytes(sig[32:])
	return signing + "." + enc.EncodeToString(sig), nil
}

// Authorization is the RFC 8292 §3 header value for token.
func (s *VAPIDSigner) Authorization(token string) string {
	return "vapid t=" + token + ", k=" + s.Public
}

func trimPad(s string) string {
	for len(s) > 0 && s[len(s)-1] == '=' {
		s = s[:len(s)-1]
	}
	return s
}
