package token

import (
	"crypto/hkdf"
	"crypto/sha256"
)

// Derive returns n bytes of key material for purpose (a label naming
// what the key is for, never reused for another), expanded from the
// first CRYPTO_KEY key with HKDF-SHA256 (RFC 5869). Every node given the
// same first key derives the same bytes, so what one node seals another
// opens; a new first key (a rotation) derives other bytes, and what the
// old ones sealed no longer opens. The Fernet keys themselves never
// leave the package. n must be at most 8160 (255 SHA-256 blocks).
func (k *Keys) Derive(purpose string, n int) ([]byte, error) {
	return hkdf.Key(sha256.New, k.first[:], nil, purpose, n)
}
