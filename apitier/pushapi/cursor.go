package pushapi

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
)

// A listing's next cursor is the store's position after its page's last
// index entry: that entry's push id and time (scylla's in plain text),
// which is often a push the client may not see (another client's, or a
// bridged one: pages are filtered after the store cuts them). So the
// store's cursor is handed out only sealed: encrypted and authenticated
// (AES-256-GCM) under the push API's cursor key, bound to the client it
// was given to and to its listing (the state, or the pushKey searched).
// A cursor that another client presents, or for another listing, or
// altered, truncated, or sealed under another key (CRYPTO_KEY's first key
// changed: a rotation) does not open, and is refused (400).
//
// Each cursor is sealed under a key of its own, derived from the cursor
// key and 16 random bytes carried in the cursor (HKDF-SHA256): GCM's
// random 96-bit nonces would allow only about 2^32 cursors per key,
// which a busy API could give in months.
//
//	cursor = base64url(version ‖ salt (16) ‖ AES-256-GCM(store's cursor) ‖ tag (16))

const (
	cursorVersion = 1
	cursorSalt    = 16
	cursorTag     = 16
	// maxCursor bounds a cursor's length before it is decoded: a store's
	// cursor is well under 128 bytes.
	maxCursor = 512
	// cursorKeyPurpose labels the cursor key derived from CRYPTO_KEY;
	// cursorPurpose each cursor's key derived from it, and its binding.
	cursorKeyPurpose = "autopush push API cursor key v1"
	cursorPurpose    = "autopush push API cursor v1"
)

// CursorKeySize is the length of Config.CursorKey.
const CursorKeySize = 32

// cursors seals and opens the listings' cursors. Safe for concurrent use.
type cursors struct{ key []byte }

func newCursors(key []byte) (*cursors, error) {
	if len(key) != CursorKeySize {
		return nil, fmt.Errorf("pushapi: the cursor key is %d bytes, want %d", len(key), CursorKeySize)
	}
	return &cursors{key: append([]byte(nil), key...)}, nil
}

// aead is the cipher of the cursor whose salt is salt.
func (c *cursors) aead(salt []byte) (cipher.AEAD, error) {
	k, err := hkdf.Key(sha256.New, c.key, salt, cursorPurpose, 32)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(k)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// binding is what a cursor is bound to: the client's name (letters,
// digits, '.', '_', '-': no NUL) and the listing.
func binding(client, listing string) []byte {
	return []byte(cursorPurpose + "\x00" + client + "\x00" + listing)
}

// seal returns the store's cursor inner sealed for client and listing;
// "" (no more pages) stays "".
func (c *cursors) seal(client, listing, inner string) (string, error) {
	if inner == "" {
		return "", nil
	}
	out := make([]byte, 1+cursorSalt, 1+cursorSalt+len(inner)+cursorTag)
	out[0] = cursorVersion
	rand.Read(out[1:]) // never fails (crypto/rand)
	aead, err := c.aead(out[1:])
	if err != nil {
		return "", err
	}
	// Each key seals one cursor: the nonce may be fixed.
	out = aead.Seal(out, make([]byte, aead.NonceSize()), []byte(inner), binding(client, listing))
	return base64.RawURLEncoding.EncodeToString(out), nil
}

// open returns the store's cursor sealed in s for client and listing
// ("" for ""); false when s is not a cursor this API sealed for them
// under this key.
func (c *cursors) open(client, listing, s string) (string, bool) {
	if s == "" {
		return "", true
	}
	if len(s) > maxCursor {
		return "", false
	}
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(raw) < 1+cursorSalt+cursorTag || raw[0] != cursorVersion {
		return "", false
	}
	aead, err := c.aead(raw[1 : 1+cursorSalt])
	if err != nil {
		return "", false
	}
	inner, err := aead.Open(nil, make([]byte, aead.NonceSize()), raw[1+cursorSalt:], binding(client, listing))
	if err != nil || len(inner) == 0 {
		return "", false
	}
	return string(inner), true
}

// CursorKey derives the push API's cursor key (Config.CursorKey) with
// derive, a CRYPTO_KEY's Keys.Derive: every node sharing CRYPTO_KEY
// opens the others' cursors.
func CursorKey(derive func(purpose string, n int) ([]byte, error)) ([]byte, error) {
	return derive(cursorKeyPurpose, CursorKeySize)
}
