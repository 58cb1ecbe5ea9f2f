package pushcrypto

import (
	"bytes"
	"crypto/ecdh"
	"crypto/rand"
)

// Encrypter encrypts aes128gcm messages for one subscription with one
// sender key pair, whose ECDH and RFC 8291 key derivation it does once:
// each message still has its own random salt, so its own content key and
// nonce (RFC 8188 §2.2), but the costly scalar multiplications are not
// repeated. The web-push libraries make a new key pair per message; the
// load tester uses this so that its own CPU goes to sending, not to
// elliptic curves the push service never sees (it does not decrypt).
// Safe for concurrent use.
type Encrypter struct {
	ikm, asPublic []byte
}

// NewEncrypter makes an Encrypter for the subscription's p256dh key
// (65 bytes) and auth secret (16), with a new sender key pair.
func NewEncrypter(uaPublic, authSecret []byte) (*Encrypter, error) {
	c, ua, err := setup(nil, uaPublic, authSecret)
	if err != nil {
		return nil, err
	}
	secret, err := c.sender.ECDH(ua)
	if err != nil {
		return nil, ErrPublicKey
	}
	asPublic := c.sender.PublicKey().Bytes()
	return &Encrypter{ikm: webPushIKM(secret, authSecret, uaPublic, asPublic), asPublic: asPublic}, nil
}

// Encrypt is EncryptAES128GCM with the Encrypter's sender key and a fresh
// random salt, in records of DefaultRecordSize.
func (e *Encrypter) Encrypt(plaintext []byte) ([]byte, error) {
	c := config{rs: DefaultRecordSize, salt: make([]byte, SaltLen)}
	rand.Read(c.salt)
	per := c.rs - minRS128 + 1
	n := max((len(plaintext)+per-1)/per, 1)
	return seal128(c, e.ikm, e.asPublic, plaintext, n, per)
}

// Decrypter is DecryptAES128GCM for one subscription that remembers the
// key derivation of the last sender key it saw: messages from an
// Encrypter (one sender key) cost one ECDH, not one each. It checks
// exactly what DecryptAES128GCM checks. Not safe for concurrent use.
type Decrypter struct {
	priv        *ecdh.PrivateKey
	auth        []byte
	lastAS, ikm []byte
}

// NewDecrypter makes a Decrypter for the subscription's private key and
// auth secret.
func NewDecrypter(uaPrivate *ecdh.PrivateKey, authSecret []byte) (*Decrypter, error) {
	if uaPrivate == nil || uaPrivate.Curve() != ecdh.P256() {
		return nil, ErrPrivateKey
	}
	if len(authSecret) != AuthSecretLen {
		return nil, ErrAuthSecret
	}
	return &Decrypter{priv: uaPrivate, auth: authSecret}, nil
}

// Decrypt decrypts one aes128gcm body.
func (d *Decrypter) Decrypt(body []byte) ([]byte, error) {
	asPublic, err := header128(body)
	if err != nil {
		return nil, err
	}
	if d.ikm == nil || !bytes.Equal(asPublic, d.lastAS) {
		as, err := ecdh.P256().NewPublicKey(asPublic)
		if err != nil {
			return nil, ErrHeader
		}
		secret, err := d.priv.ECDH(as)
		if err != nil {
			return nil, ErrHeader
		}
		d.ikm = webPushIKM(secret, d.auth, d.priv.PublicKey().Bytes(), asPublic)
		d.lastAS = bytes.Clone(asPublic)
	}
	return openBody128(body, d.ikm)
}
