package token

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
	"strings"
	"sync"
	"time"
)

// Fernet token layout (https://github.com/fernet/spec, Spec.md):
//
//	0x80 ‖ timestamp (uint64 BE, seconds) ‖ IV (16) ‖ AES-128-CBC(PKCS7(plaintext)) ‖ HMAC-SHA256 (32)
//
// the whole token in url-safe base64 with padding. The key is 32 bytes: the
// first 16 sign, the last 16 encrypt.
const (
	versionByte = 0x80
	headerLen   = 1 + 8 + aes.BlockSize // version, timestamp, IV
	macLen      = sha256.Size
	overhead    = headerLen + macLen
	// maxClockSkew: a token stamped further than this in the future is
	// refused even without a TTL, as the reference's fernet crate does.
	maxClockSkew = 60 * time.Second
)

// ErrFernet is returned for every token that does not decrypt: bad
// encoding, unknown version, wrong key, tampered, expired or from the future.
// The causes are deliberately not told apart, as the spec asks.
var ErrFernet = errors.New("token: invalid fernet token")

// Fernet is one Fernet key: safe for concurrent use.
type Fernet struct {
	signingKey [16]byte
	block      cipher.Block
	// macs holds HMAC states keyed with signingKey; Reset is much cheaper
	// than hmac.New, which rehashes the key.
	macs sync.Pool
}

// NewFernet parses a Fernet key: 32 bytes in url-safe base64, with or
// without padding (the form `autokey` and every Fernet library print).
func NewFernet(key string) (*Fernet, error) {
	raw, err := parseFernetKey(key)
	if err != nil {
		return nil, err
	}
	return newFernetRaw(raw), nil
}

// parseFernetKey decodes a Fernet key's 32 bytes.
func parseFernetKey(key string) ([]byte, error) {
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(key, "="))
	if err != nil || len(raw) != 32 {
		// The key is a secret: never echo it.
		return nil, errors.New("token: a Fernet key is 32 bytes in url-safe base64")
	}
	return raw, nil
}

func newFernetRaw(raw []byte) *Fernet {
	f := &Fernet{}
	copy(f.signingKey[:], raw[:16])
	block, err := aes.NewCipher(raw[16:32])
	if err != nil {
		panic(err) // unreachable: the key is 16 bytes
	}
	f.block = block
	f.macs.New = func() any { return hmac.New(sha256.New, f.signingKey[:]) }
	return f
}

// GenerateKey returns a new random Fernet key in the CRYPTO_KEY form
// (url-safe base64 with padding, 44 characters).
func GenerateKey() string {
	var k [32]byte
	if _, err := rand.Read(k[:]); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return base64.URLEncoding.EncodeToString(k[:])
}

// Encrypt seals plaintext into a Fernet token (url-safe base64, padded)
// stamped with now. The IV is read from iv, or from crypto/rand when iv is
// nil; the spec test vectors pass a fixed one.
func (f *Fernet) Encrypt(plaintext []byte, now time.Time, iv io.Reader) (string, error) {
	raw, err := f.seal(nil, plaintext, now, iv)
	if err != nil {
		return "", err
	}
	return base64.URLEncoding.EncodeToString(raw), nil
}

// Decrypt opens a Fernet token (url-safe base64; the padding may be left
// out). A ttl > 0 also refuses tokens stamped more than ttl before now.
// Tokens stamped more than a minute after now are always refused.
func (f *Fernet) Decrypt(token string, now time.Time, ttl time.Duration) ([]byte, error) {
	raw, ok := decodeB64(nil, token)
	if !ok {
		return nil, ErrFernet
	}
	if !wellFormed(raw, now, ttl) {
		return nil, ErrFernet
	}
	var sum [sha256.Size]byte
	if !f.verify(raw, &sum) {
		return nil, ErrFernet
	}
	return f.open(nil, raw)
}

// seal appends the raw (not yet base64) token for plaintext to dst.
func (f *Fernet) seal(dst, plaintext []byte, now time.Time, iv io.Reader) ([]byte, error) {
	pad := aes.BlockSize - len(plaintext)%aes.BlockSize
	total := overhead + len(plaintext) + pad
	start := len(dst)
	dst = grow(dst, total)
	out := dst[start:]
	out[0] = versionByte
	binary.BigEndian.PutUint64(out[1:9], uint64(now.Unix()))
	ivb := out[9:headerLen]
	var err error
	if iv == nil {
		_, err = rand.Read(ivb)
	} else {
		_, err = io.ReadFull(iv, ivb)
	}
	if err != nil {
		return dst[:start], fmt.Errorf("token: fernet IV: %w", err)
	}
	ct := out[headerLen : total-macLen]
	copy(ct, plaintext)
	for i := len(plaintext); i < len(ct); i++ {
		ct[i] = byte(pad)
	}
	// CBC by hand: a few blocks, and no allocation for the mode object.
	prev := ivb
	for i := 0; i < len(ct); i += aes.BlockSize {
		b := ct[i : i+aes.BlockSize]
		xorInto(b, prev)
		f.block.Encrypt(b, b)
		prev = b
	}
	mac := f.macs.Get().(hash.Hash)
	mac.Reset()
	mac.Write(out[:total-macLen])
	mac.Sum(out[total-macLen : total-macLen])
	f.macs.Put(mac)
	return dst, nil
}

// wellFormed checks what does not need the key: size, version byte
// and timestamp.
func wellFormed(raw []byte, now time.Time, ttl time.Duration) bool {
	// At least one ciphertext block, and whole blocks.
	if len(raw) < overhead+aes.BlockSize || (len(raw)-overhead)%aes.BlockSize != 0 {
		return false
	}
	if raw[0] != versionByte {
		return false
	}
	ts := int64(binary.BigEndian.Uint64(raw[1:9]))
	nowSec := now.Unix()
	if ts < 0 || ts > nowSec+int64(maxClockSkew/time.Second) {
		return false
	}
	if ttl > 0 && nowSec-ts > int64(ttl/time.Second) {
		return false
	}
	return true
}

// verify checks the HMAC in constant time; sum is working space.
func (f *Fernet) verify(raw []byte, sum *[sha256.Size]byte) bool {
	body := len(raw) - macLen
	mac := f.macs.Get().(hash.Hash)
	mac.Reset()
	mac.Write(raw[:body])
	ok := hmac.Equal(mac.Sum(sum[:0]), raw[body:])
	f.macs.Put(mac)
	return ok
}

// open decrypts a verified raw token, appending the plaintext to dst.
func (f *Fernet) open(dst, raw []byte) ([]byte, error) {
	iv := raw[9:headerLen]
	ct := raw[headerLen : len(raw)-macLen]
	start := len(dst)
	dst = grow(dst, len(ct))
	pt := dst[start:]
	prev := iv
	for i := 0; i < len(ct); i += aes.BlockSize {
		f.block.Decrypt(pt[i:i+aes.BlockSize], ct[i:i+aes.BlockSize])
		xorInto(pt[i:i+aes.BlockSize], prev)
		prev = ct[i : i+aes.BlockSize]
	}
	// PKCS7. The MAC was checked first, so this is no padding oracle.
	pad := int(pt[len(pt)-1])
	if pad == 0 || pad > aes.BlockSize {
		return dst[:start], ErrFernet
	}
	for _, b := range pt[len(pt)-pad:] {
		if int(b) != pad {
			return dst[:start], ErrFernet
		}
	}
	return dst[:len(dst)-pad], nil
}

func xorInto(dst, src []byte) {
	for i := range dst {
		dst[i] ^= src[i]
	}
}

// grow extends dst by n bytes (contents unspecified).
func grow(dst []byte, n int) []byte {
	if cap(dst)-len(dst) < n {
		nd := make([]byte, len(dst), len(dst)+n)
		copy(nd, dst)
		dst = nd
	}
	return dst[:len(dst)+n]
}

// b64Values maps url-safe base64 characters to their values; 0xFF marks
// everything else (the standard alphabet's '+' and '/' included: the spec's
// invalid vectors require refusing them).
var b64Values = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xFF
	}
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	for i := range len(alphabet) {
		t[alphabet[i]] = byte(i)
	}
	return t
}()

// decodeB64 appends the url-safe base64 decoding of s to dst. Padding is
// optional (endpoint tokens travel without it); nothing may follow it, and
// the unused low bits of the last character must be zero, so a byte string
// has one accepted encoding up to padding. It reads s as a string so callers
// need not copy URL path segments into byte slices.
func decodeB64(dst []byte, s string) ([]byte, bool) {
	n := len(s)
	pads := 0
	for pads < 2 && n > 0 && s[n-1] == '=' {
		n--
		pads++
	}
	s = s[:n]
	// The reference re-pads a token to a multiple of 4 before decoding, so
	// any prefix of the right padding is accepted, none beyond it.
	if n%4 == 1 || pads > (4-n%4)%4 {
		return dst, false
	}
	start := len(dst)
	dst = grow(dst, n*3/4)
	out := dst[start:]
	o := 0
	i := 0
	for ; i+4 <= n; i += 4 {
		a, b, c, d := b64Values[s[i]], b64Values[s[i+1]], b64Values[s[i+2]], b64Values[s[i+3]]
		if (a|b|c|d)&0xC0 != 0 {
			return dst[:start], false
		}
		v := uint32(a)<<18 | uint32(b)<<12 | uint32(c)<<6 | uint32(d)
		out[o], out[o+1], out[o+2] = byte(v>>16), byte(v>>8), byte(v)
		o += 3
	}
	switch n - i {
	case 2:
		a, b := b64Values[s[i]], b64Values[s[i+1]]
		if (a|b)&0xC0 != 0 || b&0x0F != 0 {
			return dst[:start], false
		}
		out[o] = a<<2 | b>>4
	case 3:
		a, b, c := b64Values[s[i]], b64Values[s[i+1]], b64Values[s[i+2]]
		if (a|b|c)&0xC0 != 0 || c&0x03 != 0 {
			return dst[:start], false
		}
		out[o], out[o+1] = a<<2|b>>4, b<<4|c>>2
	}
	return dst, true
}

// Keys is the service's CRYPTO_KEY: one or more Fernet keys, as the
// reference's MultiFernet. The first encrypts; all are tried to decrypt, so
// a key can be rotated in at the front while tokens made with the old one
// keep working. Safe for concurrent use.
type Keys struct {
	fernets []*Fernet
	// first is the first key's 32 bytes, the secret Derive expands.
	first [32]byte
	// Test hooks: the clock and the IV source (nil: time.Now, crypto/rand).
	now func() time.Time
	iv  io.Reader
}

// ParseKeys parses a CRYPTO_KEY value: one key, or several separated by
// commas. The reference's bracketed form "[key1,key2]" is accepted too, as
// are spaces and double quotes around keys (its config files carry them).
func ParseKeys(cryptoKey string) (*Keys, error) {
	s := strings.TrimSpace(cryptoKey)
	if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		s = s[1 : len(s)-1]
	}
	var ks Keys
	for i, part := range strings.Split(s, ",") {
		part = strings.Trim(strings.TrimSpace(part), `"'`)
		raw, err := parseFernetKey(part)
		if err != nil {
			return nil, fmt.Errorf("token: CRYPTO_KEY key %d of %d: %w", i+1, strings.Count(s, ",")+1, err)
		}
		if i == 0 {
			copy(ks.first[:], raw)
		}
		ks.fernets = append(ks.fernets, newFernetRaw(raw))
	}
	return &ks, nil
}

// Len is the number of keys.
func (k *Keys) Len() int { return len(k.fernets) }

func (k *Keys) clock() time.Time {
	if k.now != nil {
		return k.now()
	}
	return time.Now()
}

// Encrypt seals plaintext with the first key into a padded Fernet token.
func (k *Keys) Encrypt(plaintext []byte) (string, error) {
	return k.fernets[0].Encrypt(plaintext, k.clock(), k.iv)
}

// Decrypt opens a token made with any of the keys (padding optional). A ttl
// > 0 also refuses tokens older than ttl.
func (k *Keys) Decrypt(token string, ttl time.Duration) ([]byte, error) {
	raw, ok := decodeB64(nil, token)
	if !ok {
		return nil, ErrFernet
	}
	var sum [sha256.Size]byte
	return k.openRaw(nil, raw, ttl, &sum)
}

// openRaw decrypts a decoded token, appending the plaintext to dst. The key
// independent checks run once, then each key's MAC is tried in turn. sum is
// working space.
func (k *Keys) openRaw(dst, raw []byte, ttl time.Duration, sum *[sha256.Size]byte) ([]byte, error) {
	if !wellFormed(raw, k.clock(), ttl) {
		return dst, ErrFernet
	}
	for _, f := range k.fernets {
		if f.verify(raw, sum) {
			return f.open(dst, raw)
		}
	}
	return dst, ErrFernet
}

// scratch is working space for one token operation. The buffers
// reach the cipher.Block and hash.Hash interfaces, so arrays on the stack
// would escape to the heap on every call; pooled ones do not.
type scratch struct {
	raw   [scratchLen]byte
	plain [scratchLen]byte
	sum   [sha256.Size]byte
}

// scratchLen fits every endpoint token and message id, decoded or
// encoded; longer input is refused before it is decoded.
const scratchLen = 256

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// sealRaw seals plaintext with the first key, appending the raw token.
func (k *Keys) sealRaw(dst, plaintext []byte) ([]byte, error) {
	return k.fernets[0].seal(dst, plaintext, k.clock(), k.iv)
}
