package pushcrypto

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdh"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"strconv"
	"strings"

	"github.com/autopush-go/autopush/internal/vapid"
)

// Web Push message encryption, both ends: what an application server does
// to a message and what a user agent does to read it. The push service
// itself never decrypts; tests, the load tester and the operator CLI do.
//
//	aes128gcm  RFC 8291 over RFC 8188: the body carries salt, record size
//	           and the sender's public key in a header.
//	aesgcm     draft-ietf-webpush-encryption-04 over
//	           draft-ietf-httpbis-encryption-encoding-03: salt and key
//	           travel in the Encryption and Crypto-Key headers.

const (
	// SaltLen is the salt length of both encodings.
	SaltLen = 16
	// AuthSecretLen is the length of a subscription's auth secret.
	AuthSecretLen = 16
	// DefaultRecordSize is the record size both encodings default to.
	DefaultRecordSize = 4096
	// AES128GCMHeaderLen is the aes128gcm header a Web Push body starts
	// with: salt (16) ‖ rs (4) ‖ idlen (1) ‖ sender public key (65).
	AES128GCMHeaderLen = SaltLen + 4 + 1 + vapid.KeyLen

	tagLen = 16
	// RFC 8188 §2: a record holds at least one octet (the delimiter) and
	// the tag.
	minRS128 = tagLen + 2
	// aesgcm records start with a 2-byte padding length.
	minRSGCM = 3
)

// The errors of both encodings, returned unwrapped: compare with ==.
var (
	ErrPublicKey  = errors.New("pushcrypto: public key is not an uncompressed P-256 point")
	ErrPrivateKey = errors.New("pushcrypto: private key is not a P-256 key")
	ErrAuthSecret = errors.New("pushcrypto: auth secret is not 16 bytes")
	ErrSalt       = errors.New("pushcrypto: salt is not 16 bytes")
	ErrRecordSize = errors.New("pushcrypto: record size out of range")
	ErrPadding    = errors.New("pushcrypto: bad padding")
	ErrTooLarge   = errors.New("pushcrypto: padding does not fit the last record")
	ErrHeader     = errors.New("pushcrypto: bad aes128gcm header")
	ErrTruncated  = errors.New("pushcrypto: truncated message")
	ErrDecrypt    = errors.New("pushcrypto: a record does not decrypt (wrong key or auth secret, or tampered)")
	ErrParams     = errors.New("pushcrypto: bad Encryption or Crypto-Key header")
)

// Option adjusts an encryption (or, for RecordSize, an aesgcm
// decryption).
type Option func(*config)

type config struct {
	salt   []byte
	sender *ecdh.PrivateKey
	rs     int
	pad    int
}

// Salt fixes the salt (16 bytes) instead of a random one: for test
// vectors only, a salt must never be reused with the same keys.
func Salt(salt []byte) Option { return func(c *config) { c.salt = salt } }

// SenderKey fixes the sender's (application server's) ECDH key instead
// of a fresh one: for test vectors only.
func SenderKey(k *ecdh.PrivateKey) Option { return func(c *config) { c.sender = k } }

// RecordSize sets rs: for aes128gcm the size of an encrypted record
// (>= 18, tag included), for aesgcm of a plaintext record (>= 3, tag not
// included), as each encoding defines it. Default 4096.
func RecordSize(rs int) Option { return func(c *config) { c.rs = rs } }

// Padding adds n zero octets of padding to the last record.
func Padding(n int) Option { return func(c *config) { c.pad = n } }

func setup(opts []Option, uaPublic, authSecret []byte) (config, *ecdh.PublicKey, error) {
	c := config{rs: DefaultRecordSize}
	for _, o := range opts {
		o(&c)
	}
	ua, err := ecdh.P256().NewPublicKey(uaPublic)
	if err != nil || len(uaPublic) != vapid.KeyLen {
		return c, nil, ErrPublicKey
	}
	if len(authSecret) != AuthSecretLen {
		return c, nil, ErrAuthSecret
	}
	if c.pad < 0 {
		return c, nil, ErrPadding
	}
	if c.salt == nil {
		c.salt = make([]byte, SaltLen)
		rand.Read(c.salt)
	} else if len(c.salt) != SaltLen {
		return c, nil, ErrSalt
	}
	if c.sender == nil {
		if c.sender, err = ecdh.P256().GenerateKey(rand.Reader); err != nil {
			return c, nil, err
		}
	} else if c.sender.Curve() != ecdh.P256() {
		return c, nil, ErrPrivateKey
	}
	return c, ua, nil
}

// EncryptAES128GCM encrypts a push message for a subscription (RFC 8291):
// uaPublic is its p256dh key (65 bytes), authSecret its auth (16). The
// result is the request body: the aes128gcm header (salt, rs, the sender's
// public key as keyid) and the records. A message that fits one record
// (plaintext <= rs-17-padding, so up to 4079 octets by default) is one
// record, as RFC 8291 requires; a longer one takes several.
func EncryptAES128GCM(plaintext, uaPublic, authSecret []byte, opts ...Option) ([]byte, error) {
	c, ua, err := setup(opts, uaPublic, authSecret)
	if err != nil {
		return nil, err
	}
	if c.rs < minRS128 || int64(c.rs) > 1<<32-1 {
		return nil, ErrRecordSize
	}
	// Records carry rs-17 plaintext octets, and a delimiter; padding goes
	// in the last one.
	per := c.rs - minRS128 + 1
	n := max((len(plaintext)+per-1)/per, 1)
	lastLen := len(plaintext) - (n-1)*per
	if lastLen+1+c.pad > per+1 {
		return nil, ErrTooLarge
	}
	secret, err := c.sender.ECDH(ua)
	if err != nil {
		return nil, ErrPublicKey
	}
	asPublic := c.sender.PublicKey().Bytes()
	return seal128(c, webPushIKM(secret, authSecret, uaPublic, asPublic), asPublic, plaintext, n, per)
}

// seal128 is the aes128gcm body of plaintext in n records of per
// plaintext octets, from the IKM and the sender's public key.
func seal128(c config, ikm, asPublic, plaintext []byte, n, per int) ([]byte, error) {
	aead, nonce, err := keys128(ikm, c.salt)
	if err != nil {
		return nil, err
	}

	size := AES128GCMHeaderLen + len(plaintext) + n*(1+tagLen) + c.pad
	body := make([]byte, 0, size)
	body = append(body, c.salt...)
	body = binary.BigEndian.AppendUint32(body, uint32(c.rs))
	body = append(body, vapid.KeyLen)
	body = append(body, asPublic...)
	var nb [12]byte
	for seq := 0; seq < n; seq++ {
		chunk := plaintext[seq*per : min((seq+1)*per, len(plaintext))]
		start := len(body)
		body = append(body, chunk...)
		if seq == n-1 {
			body = append(body, 2)
			body = append(body, make([]byte, c.pad)...)
		} else {
			body = append(body, 1)
		}
		// Sealed in place: body has the room for the tag.
		body = aead.Seal(body[:start], recordNonce(&nb, nonce, uint64(seq)), body[start:], nil)
	}
	return body, nil
}

// DecryptAES128GCM is the user agent's side of EncryptAES128GCM: it
// decrypts a push message body with the subscription's private key and
// auth secret. It is strict: the keyid must be a 65-byte P-256 point
// (RFC 8291 §4), rs at least 18, every record but the last exactly rs
// with delimiter 1, the last with delimiter 2, padding all zeros.
func DecryptAES128GCM(body []byte, uaPrivate *ecdh.PrivateKey, authSecret []byte) ([]byte, error) {
	if uaPrivate == nil || uaPrivate.Curve() != ecdh.P256() {
		return nil, ErrPrivateKey
	}
	if len(authSecret) != AuthSecretLen {
		return nil, ErrAuthSecret
	}
	asPublic, err := header128(body)
	if err != nil {
		return nil, err
	}
	as, err := ecdh.P256().NewPublicKey(asPublic)
	if err != nil {
		return nil, ErrHeader
	}
	secret, err := uaPrivate.ECDH(as)
	if err != nil {
		return nil, ErrHeader
	}
	uaPublic := uaPrivate.PublicKey().Bytes()
	return openBody128(body, webPushIKM(secret, authSecret, uaPublic, asPublic))
}

// header128 checks an aes128gcm body's header (its length, a 65-octet
// keyid, rs at least 18) and returns the keyid: the sender's public key.
func header128(body []byte) ([]byte, error) {
	if len(body) < AES128GCMHeaderLen || body[20] != vapid.KeyLen {
		return nil, ErrHeader
	}
	if binary.BigEndian.Uint32(body[16:20]) < minRS128 {
		return nil, ErrRecordSize
	}
	return body[21:AES128GCMHeaderLen], nil
}

// openBody128 decrypts an aes128gcm body whose header was checked, with
// the IKM its sender key gives.
func openBody128(body, ikm []byte) ([]byte, error) {
	aead, nonce, err := keys128(ikm, body[:SaltLen])
	if err != nil {
		return nil, err
	}
	return open128(aead, nonce, body[AES128GCMHeaderLen:], binary.BigEndian.Uint32(body[16:20]))
}

// webPushIKM is RFC 8291 §3.3: the input keying material for RFC 8188,
// from the ECDH secret bound to the auth secret and both public keys.
func webPushIKM(secret, authSecret, uaPublic, asPublic []byte) []byte {
	info := make([]byte, 0, 14+2*vapid.KeyLen)
	info = append(info, "WebPush: info\x00"...)
	info = append(info, uaPublic...)
	info = append(info, asPublic...)
	ikm, _ := hkdf.Key(sha256.New, secret, authSecret, string(info), 32)
	return ikm
}

// keys128 is RFC 8188 §2.2-2.3: the content-encryption key and base
// nonce from the IKM and salt.
func keys128(ikm, salt []byte) (cipher.AEAD, [12]byte, error) {
	cek, nonce, err := derive128(ikm, salt)
	if err != nil {
		return nil, nonce, err
	}
	aead, err := newAEAD(cek)
	return aead, nonce, err
}

func derive128(ikm, salt []byte) (cek []byte, nonce [12]byte, err error) {
	prk, err := hkdf.Extract(sha256.New, ikm, salt)
	if err != nil {
		return nil, nonce, err
	}
	cek, _ = hkdf.Expand(sha256.New, prk, "Content-Encoding: aes128gcm\x00", 16)
	n, _ := hkdf.Expand(sha256.New, prk, "Content-Encoding: nonce\x00", 12)
	copy(nonce[:], n)
	return cek, nonce, nil
}

func newAEAD(cek []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(cek)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// recordNonce is the nonce of record seq: the base nonce XOR seq as a 96-bit
// big-endian number (RFC 8188 §2.3; the same in aesgcm).
func recordNonce(dst *[12]byte, base [12]byte, seq uint64) []byte {
	*dst = base
	var s [8]byte
	binary.BigEndian.PutUint64(s[:], seq)
	for i := range s {
		dst[4+i] ^= s[i]
	}
	return dst[:]
}

// open128 decrypts and unpads aes128gcm records (RFC 8188 §2).
func open128(aead cipher.AEAD, nonce [12]byte, ct []byte, rs uint32) ([]byte, error) {
	if len(ct) == 0 {
		return nil, ErrTruncated
	}
	out := make([]byte, 0, len(ct))
	var nb [12]byte
	for seq := uint64(0); len(ct) > 0; seq++ {
		n := len(ct)
		if uint64(rs) < uint64(n) {
			n = int(rs)
		}
		rec := ct[:n]
		ct = ct[n:]
		last := len(ct) == 0
		if n <= tagLen {
			// A record with no room for its delimiter: cut short.
			return nil, ErrTruncated
		}
		start := len(out)
		var err error
		if out, err = aead.Open(out, recordNonce(&nb, nonce, seq), rec, nil); err != nil {
			return nil, ErrDecrypt
		}
		i := len(out) - 1
		for i >= start && out[i] == 0 {
			i--
		}
		switch {
		case i < start:
			return nil, ErrPadding // no delimiter
		case out[i] == 2 && last, out[i] == 1 && !last:
		case out[i] == 1:
			// RFC 8188 §2: a last record with delimiter 1 means the
			// stream was cut at a record boundary.
			return nil, ErrTruncated
		default:
			return nil, ErrPadding
		}
		out = out[:i]
	}
	return out, nil
}

// EncryptAESGCM encrypts a message in the legacy aesgcm encoding, for
// tests of legacy senders. It returns the body, the salt (for
// "Encryption: salt=") and the sender's public key (for "Crypto-Key: dh=").
// Each record is a 2-byte padding length, the padding and up to rs-2
// octets; a message ending on a record boundary gets an empty last record,
// as the draft requires against truncation.
func EncryptAESGCM(plaintext, uaPublic, authSecret []byte, opts ...Option) (body, salt, dh []byte, err error) {
	c, ua, err := setup(opts, uaPublic, authSecret)
	if err != nil {
		return nil, nil, nil, err
	}
	if c.rs < minRSGCM {
		return nil, nil, nil, ErrRecordSize
	}
	per := c.rs - 2
	n := max((len(plaintext)+per-1)/per, 1)
	lastLen := len(plaintext) - (n-1)*per
	if lastLen+c.pad > per || c.pad > 0xffff {
		return nil, nil, nil, ErrTooLarge
	}
	trailer := lastLen+c.pad == per
	secret, err := c.sender.ECDH(ua)
	if err != nil {
		return nil, nil, nil, ErrPublicKey
	}
	dh = c.sender.PublicKey().Bytes()
	aead, nonce, err := keysGCM(secret, authSecret, c.salt, uaPublic, dh)
	if err != nil {
		return nil, nil, nil, err
	}
	records := n
	if trailer {
		records++
	}
	body = make([]byte, 0, len(plaintext)+c.pad+records*(2+tagLen))
	var nb [12]byte
	for seq := 0; seq < records; seq++ {
		var chunk []byte
		pad := 0
		if seq < n {
			chunk = plaintext[seq*per : min((seq+1)*per, len(plaintext))]
			if seq == n-1 {
				pad = c.pad
			}
		}
		start := len(body)
		body = binary.BigEndian.AppendUint16(body, uint16(pad))
		body = append(body, make([]byte, pad)...)
		body = append(body, chunk...)
		body = aead.Seal(body[:start], recordNonce(&nb, nonce, uint64(seq)), body[start:], nil)
	}
	return body, c.salt, dh, nil
}

// DecryptAESGCM decrypts a legacy aesgcm message: salt from the Encryption
// header, dh (the sender's public key) from Crypto-Key (see
// ParseAESGCMHeaders), rs 4096 unless RecordSize says otherwise (the
// Encryption header's rs). Strict, like ecec: padding must be zeros, and a
// final full-size record means truncation.
func DecryptAESGCM(body, salt, dh []byte, uaPrivate *ecdh.PrivateKey, authSecret []byte, opts ...Option) ([]byte, error) {
	c := config{rs: DefaultRecordSize}
	for _, o := range opts {
		o(&c)
	}
	if uaPrivate == nil || uaPrivate.Curve() != ecdh.P256() {
		return nil, ErrPrivateKey
	}
	if len(authSecret) != AuthSecretLen {
		return nil, ErrAuthSecret
	}
	if len(salt) != SaltLen {
		return nil, ErrSalt
	}
	if c.rs < minRSGCM {
		return nil, ErrRecordSize
	}
	as, err := ecdh.P256().NewPublicKey(dh)
	if err != nil || len(dh) != vapid.KeyLen {
		return nil, ErrPublicKey
	}
	secret, err := uaPrivate.ECDH(as)
	if err != nil {
		return nil, ErrPublicKey
	}
	aead, nonce, err := keysGCM(secret, authSecret, salt, uaPrivate.PublicKey().Bytes(), dh)
	if err != nil {
		return nil, err
	}
	if len(body) == 0 {
		return nil, ErrTruncated
	}
	full := c.rs + tagLen
	out := make([]byte, 0, len(body))
	var nb [12]byte
	for seq := uint64(0); len(body) > 0; seq++ {
		n := min(full, len(body))
		rec := body[:n]
		body = body[n:]
		if len(body) == 0 && n == full {
			// The last record must be short: else the message may have
			// been cut at a record boundary.
			return nil, ErrTruncated
		}
		if n <= tagLen {
			return nil, ErrTruncated // a bare tag
		}
		start := len(out)
		if out, err = aead.Open(out, recordNonce(&nb, nonce, seq), rec, nil); err != nil {
			return nil, ErrDecrypt
		}
		if len(out)-start < 2 {
			return nil, ErrPadding // no room for the padding length
		}
		pad := int(binary.BigEndian.Uint16(out[start:]))
		if 2+pad > len(out)-start {
			return nil, ErrPadding
		}
		for _, b := range out[start+2 : start+2+pad] {
			if b != 0 {
				return nil, ErrPadding
			}
		}
		out = append(out[:start], out[start+2+pad:]...)
	}
	return out, nil
}

// keysGCM is the aesgcm key schedule: the auth secret is mixed in
// first, then the salt, with a context naming both public keys.
func keysGCM(secret, authSecret, salt, uaPublic, asPublic []byte) (cipher.AEAD, [12]byte, error) {
	var nonce [12]byte
	ikm, err := hkdf.Key(sha256.New, secret, authSecret, "Content-Encoding: auth\x00", 32)
	if err != nil {
		return nil, nonce, err
	}
	ctx := make([]byte, 0, 6+2*(2+vapid.KeyLen))
	ctx = append(ctx, "P-256\x00"...)
	ctx = binary.BigEndian.AppendUint16(ctx, uint16(len(uaPublic)))
	ctx = append(ctx, uaPublic...)
	ctx = binary.BigEndian.AppendUint16(ctx, uint16(len(asPublic)))
	ctx = append(ctx, asPublic...)
	prk, err := hkdf.Extract(sha256.New, ikm, salt)
	if err != nil {
		return nil, nonce, err
	}
	cek, _ := hkdf.Expand(sha256.New, prk, "Content-Encoding: aesgcm\x00"+string(ctx), 16)
	n, _ := hkdf.Expand(sha256.New, prk, "Content-Encoding: nonce\x00"+string(ctx), 12)
	copy(nonce[:], n)
	aead, err := newAEAD(cek)
	return aead, nonce, err
}

// ParseAESGCMHeaders reads an aesgcm message's parameters: salt (and rs,
// default 4096) from the Encryption header, dh from Crypto-Key. Items may
// be separated by ';' or ',', values quoted, base64 url-safe or standard,
// padded or not. The first salt, rs and dh win.
func ParseAESGCMHeaders(encryption, cryptoKey string) (salt, dh []byte, rs int, err error) {
	rs = DefaultRecordSize
	var haveSalt, haveRS bool
	for s := encryption; s != ""; {
		var name, value string
		name, value, s = vapid.NextParam(s)
		switch {
		case !haveSalt && strings.EqualFold(name, "salt"):
			if salt, haveSalt = decodeParam(value); !haveSalt || len(salt) != SaltLen {
				return nil, nil, 0, ErrParams
			}
		case !haveRS && strings.EqualFold(name, "rs"):
			haveRS = true
			if rs, err = strconv.Atoi(value); err != nil || rs < minRSGCM {
				return nil, nil, 0, ErrParams
			}
		}
	}
	for s := cryptoKey; s != "" && dh == nil; {
		var name, value string
		name, value, s = vapid.NextParam(s)
		if strings.EqualFold(name, "dh") {
			var ok bool
			if dh, ok = decodeParam(value); !ok || len(dh) != vapid.KeyLen {
				return nil, nil, 0, ErrParams
			}
			if _, err := ecdh.P256().NewPublicKey(dh); err != nil {
				return nil, nil, 0, ErrParams
			}
		}
	}
	if salt == nil || dh == nil {
		return nil, nil, 0, ErrParams
	}
	return salt, dh, rs, nil
}

// decodeParam decodes a header parameter as senders write them: either
// alphabet, padding optional.
func decodeParam(s string) ([]byte, bool) {
	s = strings.TrimRight(s, "=")
	enc := base64.RawURLEncoding
	if strings.ContainsAny(s, "+/") {
		enc = base64.RawStdEncoding
	}
	b, err := enc.DecodeString(s)
	return b, err == nil
}
