package webpush

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
	// ECESaltLen is the salt length of both encodings.
	ECESaltLen = 16
	// ECEAuthSecretLen is the length of a subscription's auth secret.
	ECEAuthSecretLen = 16
	// ECEDefaultRecordSize is the record size both encodings default to.
	ECEDefaultRecordSize = 4096
	// ECEAES128GCMHeaderLen is the aes128gcm header a Web Push body starts
	// with: salt (16) ‖ rs (4) ‖ idlen (1) ‖ sender public key (65).
	ECEAES128GCMHeaderLen = ECESaltLen + 4 + 1 + VAPIDKeyLen

	eceTagLen = 16
	// RFC 8188 §2: a record holds at least one octet (the delimiter) and
	// the tag.
	eceMinRS128 = eceTagLen + 2
	// aesgcm records start with a 2-byte padding length.
	eceMinRSGCM = 3
)

// The errors of both encodings, returned unwrapped: compare with ==.
var (
	ErrECEPublicKey  = errors.New("webpush: ece: public key is not an uncompressed P-256 point")
	ErrECEPrivateKey = errors.New("webpush: ece: private key is not a P-256 key")
	ErrECEAuthSecret = errors.New("webpush: ece: auth secret is not 16 bytes")
	ErrECESalt       = errors.New("webpush: ece: salt is not 16 bytes")
	ErrECERecordSize = errors.New("webpush: ece: record size out of range")
	ErrECEPadding    = errors.New("webpush: ece: bad padding")
	ErrECETooLarge   = errors.New("webpush: ece: padding does not fit the last record")
	ErrECEHeader     = errors.New("webpush: ece: bad aes128gcm header")
	ErrECETruncated  = errors.New("webpush: ece: truncated message")
	ErrECEDecrypt    = errors.New("webpush: ece: a record does not decrypt (wrong key or auth secret, or tampered)")
	ErrECEParams     = errors.New("webpush: ece: bad Encryption or Crypto-Key header")
)

// ECEOption adjusts an encryption (or, for ECERecordSize, an aesgcm
// decryption).
type ECEOption func(*eceConfig)

type eceConfig struct {
	salt   []byte
	sender *ecdh.PrivateKey
	rs     int
	pad    int
}

// ECESalt fixes the salt (16 bytes) instead of a random one: for test
// vectors only, a salt must never be reused with the same keys.
func ECESalt(salt []byte) ECEOption { return func(c *eceConfig) { c.salt = salt } }

// ECESenderKey fixes the sender's (application server's) ECDH key instead
// of a fresh one: for test vectors only.
func ECESenderKey(k *ecdh.PrivateKey) ECEOption { return func(c *eceConfig) { c.sender = k } }

// ECERecordSize sets rs: for aes128gcm the size of an encrypted record
// (>= 18, tag included), for aesgcm of a plaintext record (>= 3, tag not
// included), as each encoding defines it. Default 4096.
func ECERecordSize(rs int) ECEOption { return func(c *eceConfig) { c.rs = rs } }

// ECEPadding adds n zero octets of padding to the last record.
func ECEPadding(n int) ECEOption { return func(c *eceConfig) { c.pad = n } }

func eceSetup(opts []ECEOption, uaPublic, authSecret []byte) (eceConfig, *ecdh.PublicKey, error) {
	c := eceConfig{rs: ECEDefaultRecordSize}
	for _, o := range opts {
		o(&c)
	}
	ua, err := ecdh.P256().NewPublicKey(uaPublic)
	if err != nil || len(uaPublic) != VAPIDKeyLen {
		return c, nil, ErrECEPublicKey
	}
	if len(authSecret) != ECEAuthSecretLen {
		return c, nil, ErrECEAuthSecret
	}
	if c.pad < 0 {
		return c, nil, ErrECEPadding
	}
	if c.salt == nil {
		c.salt = make([]byte, ECESaltLen)
		rand.Read(c.salt)
	} else if len(c.salt) != ECESaltLen {
		return c, nil, ErrECESalt
	}
	if c.sender == nil {
		if c.sender, err = ecdh.P256().GenerateKey(rand.Reader); err != nil {
			return c, nil, err
		}
	} else if c.sender.Curve() != ecdh.P256() {
		return c, nil, ErrECEPrivateKey
	}
	return c, ua, nil
}

// EncryptAES128GCM encrypts a push message for a subscription (RFC 8291):
// uaPublic is its p256dh key (65 bytes), authSecret its auth (16). The
// result is the request body: the aes128gcm header (salt, rs, the sender's
// public key as keyid) and the records. A message that fits one record
// (plaintext <= rs-17-padding, so up to 4079 octets by default) is one
// record, as RFC 8291 requires; a longer one takes several.
func EncryptAES128GCM(plaintext, uaPublic, authSecret []byte, opts ...ECEOption) ([]byte, error) {
	c, ua, err := eceSetup(opts, uaPublic, authSecret)
	if err != nil {
		return nil, err
	}
	if c.rs < eceMinRS128 || int64(c.rs) > 1<<32-1 {
		return nil, ErrECERecordSize
	}
	// Records carry rs-17 plaintext octets, and a delimiter; padding goes
	// in the last one.
	per := c.rs - eceMinRS128 + 1
	n := max((len(plaintext)+per-1)/per, 1)
	lastLen := len(plaintext) - (n-1)*per
	if lastLen+1+c.pad > per+1 {
		return nil, ErrECETooLarge
	}
	secret, err := c.sender.ECDH(ua)
	if err != nil {
		return nil, ErrECEPublicKey
	}
	asPublic := c.sender.PublicKey().Bytes()
	aead, nonce, err := eceKeys128(eceWebPushIKM(secret, authSecret, uaPublic, asPublic), c.salt)
	if err != nil {
		return nil, err
	}

	size := ECEAES128GCMHeaderLen + len(plaintext) + n*(1+eceTagLen) + c.pad
	body := make([]byte, 0, size)
	body = append(body, c.salt...)
	body = binary.BigEndian.AppendUint32(body, uint32(c.rs))
	body = append(body, VAPIDKeyLen)
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
		body = aead.Seal(body[:start], eceNonce(&nb, nonce, uint64(seq)), body[start:], nil)
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
		return nil, ErrECEPrivateKey
	}
	if len(authSecret) != ECEAuthSecretLen {
		return nil, ErrECEAuthSecret
	}
	if len(body) < ECEAES128GCMHeaderLen || body[20] != VAPIDKeyLen {
		return nil, ErrECEHeader
	}
	salt := body[:ECESaltLen]
	rs := binary.BigEndian.Uint32(body[16:20])
	asPublic := body[21:ECEAES128GCMHeaderLen]
	as, err := ecdh.P256().NewPublicKey(asPublic)
	if err != nil {
		return nil, ErrECEHeader
	}
	if rs < eceMinRS128 {
		return nil, ErrECERecordSize
	}
	secret, err := uaPrivate.ECDH(as)
	if err != nil {
		return nil, ErrECEHeader
	}
	uaPublic := uaPrivate.PublicKey().Bytes()
	aead, nonce, err := eceKeys128(eceWebPushIKM(secret, authSecret, uaPublic, asPublic), salt)
	if err != nil {
		return nil, err
	}
	return eceOpen128(aead, nonce, body[ECEAES128GCMHeaderLen:], rs)
}

// eceWebPushIKM is RFC 8291 §3.3: the input keying material for RFC 8188,
// from the ECDH secret bound to the auth secret and both public keys.
func eceWebPushIKM(secret, authSecret, uaPublic, asPublic []byte) []byte {
	info := make([]byte, 0, 14+2*VAPIDKeyLen)
	info = append(info, "WebPush: info\x00"...)
	info = append(info, uaPublic...)
	info = append(info, asPublic...)
	ikm, _ := hkdf.Key(sha256.New, secret, authSecret, string(info), 32)
	return ikm
}

// eceKeys128 is RFC 8188 §2.2-2.3: the content-encryption key and base
// nonce from the IKM and salt.
func eceKeys128(ikm, salt []byte) (cipher.AEAD, [12]byte, error) {
	cek, nonce, err := eceDerive128(ikm, salt)
	if err != nil {
		return nil, nonce, err
	}
	aead, err := eceAEAD(cek)
	return aead, nonce, err
}

func eceDerive128(ikm, salt []byte) (cek []byte, nonce [12]byte, err error) {
	prk, err := hkdf.Extract(sha256.New, ikm, salt)
	if err != nil {
		return nil, nonce, err
	}
	cek, _ = hkdf.Expand(sha256.New, prk, "Content-Encoding: aes128gcm\x00", 16)
	n, _ := hkdf.Expand(sha256.New, prk, "Content-Encoding: nonce\x00", 12)
	copy(nonce[:], n)
	return cek, nonce, nil
}

func eceAEAD(cek []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(cek)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// eceNonce is the nonce of record seq: the base nonce XOR seq as a 96-bit
// big-endian number (RFC 8188 §2.3; the same in aesgcm).
func eceNonce(dst *[12]byte, base [12]byte, seq uint64) []byte {
	*dst = base
	var s [8]byte
	binary.BigEndian.PutUint64(s[:], seq)
	for i := range s {
		dst[4+i] ^= s[i]
	}
	return dst[:]
}

// eceOpen128 decrypts and unpads aes128gcm records (RFC 8188 §2).
func eceOpen128(aead cipher.AEAD, nonce [12]byte, ct []byte, rs uint32) ([]byte, error) {
	if len(ct) == 0 {
		return nil, ErrECETruncated
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
		if n <= eceTagLen {
			// A record with no room for its delimiter: cut short.
			return nil, ErrECETruncated
		}
		start := len(out)
		var err error
		if out, err = aead.Open(out, eceNonce(&nb, nonce, seq), rec, nil); err != nil {
			return nil, ErrECEDecrypt
		}
		i := len(out) - 1
		for i >= start && out[i] == 0 {
			i--
		}
		switch {
		case i < start:
			return nil, ErrECEPadding // no delimiter
		case out[i] == 2 && last, out[i] == 1 && !last:
		case out[i] == 1:
			// RFC 8188 §2: a last record with delimiter 1 means the
			// stream was cut at a record boundary.
			return nil, ErrECETruncated
		default:
			return nil, ErrECEPadding
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
func EncryptAESGCM(plaintext, uaPublic, authSecret []byte, opts ...ECEOption) (body, salt, dh []byte, err error) {
	c, ua, err := eceSetup(opts, uaPublic, authSecret)
	if err != nil {
		return nil, nil, nil, err
	}
	if c.rs < eceMinRSGCM {
		return nil, nil, nil, ErrECERecordSize
	}
	per := c.rs - 2
	n := max((len(plaintext)+per-1)/per, 1)
	lastLen := len(plaintext) - (n-1)*per
	if lastLen+c.pad > per || c.pad > 0xffff {
		return nil, nil, nil, ErrECETooLarge
	}
	trailer := lastLen+c.pad == per
	secret, err := c.sender.ECDH(ua)
	if err != nil {
		return nil, nil, nil, ErrECEPublicKey
	}
	dh = c.sender.PublicKey().Bytes()
	aead, nonce, err := eceKeysGCM(secret, authSecret, c.salt, uaPublic, dh)
	if err != nil {
		return nil, nil, nil, err
	}
	records := n
	if trailer {
		records++
	}
	body = make([]byte, 0, len(plaintext)+c.pad+records*(2+eceTagLen))
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
		body = aead.Seal(body[:start], eceNonce(&nb, nonce, uint64(seq)), body[start:], nil)
	}
	return body, c.salt, dh, nil
}

// DecryptAESGCM decrypts a legacy aesgcm message: salt from the Encryption
// header, dh (the sender's public key) from Crypto-Key (see
// ParseAESGCMHeaders), rs 4096 unless ECERecordSize says otherwise (the
// Encryption header's rs). Strict, like ecec: padding must be zeros, and a
// final full-size record means truncation.
func DecryptAESGCM(body, salt, dh []byte, uaPrivate *ecdh.PrivateKey, authSecret []byte, opts ...ECEOption) ([]byte, error) {
	c := eceConfig{rs: ECEDefaultRecordSize}
	for _, o := range opts {
		o(&c)
	}
	if uaPrivate == nil || uaPrivate.Curve() != ecdh.P256() {
		return nil, ErrECEPrivateKey
	}
	if len(authSecret) != ECEAuthSecretLen {
		return nil, ErrECEAuthSecret
	}
	if len(salt) != ECESaltLen {
		return nil, ErrECESalt
	}
	if c.rs < eceMinRSGCM {
		return nil, ErrECERecordSize
	}
	as, err := ecdh.P256().NewPublicKey(dh)
	if err != nil || len(dh) != VAPIDKeyLen {
		return nil, ErrECEPublicKey
	}
	secret, err := uaPrivate.ECDH(as)
	if err != nil {
		return nil, ErrECEPublicKey
	}
	aead, nonce, err := eceKeysGCM(secret, authSecret, salt, uaPrivate.PublicKey().Bytes(), dh)
	if err != nil {
		return nil, err
	}
	if len(body) == 0 {
		return nil, ErrECETruncated
	}
	full := c.rs + eceTagLen
	out := make([]byte, 0, len(body))
	var nb [12]byte
	for seq := uint64(0); len(body) > 0; seq++ {
		n := min(full, len(body))
		rec := body[:n]
		body = body[n:]
		if len(body) == 0 && n == full {
			// The last record must be short: else the message may have
			// been cut at a record boundary.
			return nil, ErrECETruncated
		}
		if n <= eceTagLen {
			return nil, ErrECETruncated // a bare tag
		}
		start := len(out)
		if out, err = aead.Open(out, eceNonce(&nb, nonce, seq), rec, nil); err != nil {
			return nil, ErrECEDecrypt
		}
		if len(out)-start < 2 {
			return nil, ErrECEPadding // no room for the padding length
		}
		pad := int(binary.BigEndian.Uint16(out[start:]))
		if 2+pad > len(out)-start {
			return nil, ErrECEPadding
		}
		for _, b := range out[start+2 : start+2+pad] {
			if b != 0 {
				return nil, ErrECEPadding
			}
		}
		out = append(out[:start], out[start+2+pad:]...)
	}
	return out, nil
}

// eceKeysGCM is the aesgcm key schedule: the auth secret is mixed in
// first, then the salt, with a context naming both public keys.
func eceKeysGCM(secret, authSecret, salt, uaPublic, asPublic []byte) (cipher.AEAD, [12]byte, error) {
	var nonce [12]byte
	ikm, err := hkdf.Key(sha256.New, secret, authSecret, "Content-Encoding: auth\x00", 32)
	if err != nil {
		return nil, nonce, err
	}
	ctx := make([]byte, 0, 6+2*(2+VAPIDKeyLen))
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
	aead, err := eceAEAD(cek)
	return aead, nonce, err
}

// ParseAESGCMHeaders reads an aesgcm message's parameters: salt (and rs,
// default 4096) from the Encryption header, dh from Crypto-Key. Items may
// be separated by ';' or ',', values quoted, base64 url-safe or standard,
// padded or not. The first salt, rs and dh win.
func ParseAESGCMHeaders(encryption, cryptoKey string) (salt, dh []byte, rs int, err error) {
	rs = ECEDefaultRecordSize
	var haveSalt, haveRS bool
	for s := encryption; s != ""; {
		var name, value string
		name, value, s = vapidNextParam(s)
		switch {
		case !haveSalt && strings.EqualFold(name, "salt"):
			if salt, haveSalt = eceB64(value); !haveSalt || len(salt) != ECESaltLen {
				return nil, nil, 0, ErrECEParams
			}
		case !haveRS && strings.EqualFold(name, "rs"):
			haveRS = true
			if rs, err = strconv.Atoi(value); err != nil || rs < eceMinRSGCM {
				return nil, nil, 0, ErrECEParams
			}
		}
	}
	for s := cryptoKey; s != "" && dh == nil; {
		var name, value string
		name, value, s = vapidNextParam(s)
		if strings.EqualFold(name, "dh") {
			var ok bool
			if dh, ok = eceB64(value); !ok || len(dh) != VAPIDKeyLen {
				return nil, nil, 0, ErrECEParams
			}
			if _, err := ecdh.P256().NewPublicKey(dh); err != nil {
				return nil, nil, 0, ErrECEParams
			}
		}
	}
	if salt == nil || dh == nil {
		return nil, nil, 0, ErrECEParams
	}
	return salt, dh, rs, nil
}

// eceB64 decodes a header parameter as senders write them: either
// alphabet, padding optional.
func eceB64(s string) ([]byte, bool) {
	s = strings.TrimRight(s, "=")
	enc := base64.RawURLEncoding
	if strings.ContainsAny(s, "+/") {
		enc = base64.RawStdEncoding
	}
	b, err := enc.DecodeString(s)
	return b, err == nil
}
