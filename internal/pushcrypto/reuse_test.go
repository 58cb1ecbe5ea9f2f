package pushcrypto

import (
	"bytes"
	"fmt"
	"testing"
)

// An Encrypter's messages are RFC 8291 messages: DecryptAES128GCM reads
// them. They share the sender key (keyid) and nothing else: each has its
// own salt, so its own key and nonce.
func TestEncrypterInterop(t *testing.T) {
	ua, auth := newSubscriber(t)
	e, err := NewEncrypter(ua.PublicKey().Bytes(), auth)
	if err != nil {
		t.Fatal(err)
	}
	a, err := e.Encrypt([]byte("first message"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := e.Encrypt([]byte("first message"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a[21:AES128GCMHeaderLen], b[21:AES128GCMHeaderLen]) {
		t.Error("two messages of one Encrypter name different sender keys")
	}
	if bytes.Equal(a[:SaltLen], b[:SaltLen]) || bytes.Equal(a[AES128GCMHeaderLen:], b[AES128GCMHeaderLen:]) {
		t.Error("two messages of one Encrypter share a salt or a ciphertext")
	}
	for _, body := range [][]byte{a, b} {
		plain, err := DecryptAES128GCM(body, ua, auth)
		if err != nil || string(plain) != "first message" {
			t.Errorf("decrypt: %q %v", plain, err)
		}
	}
	long := bytes.Repeat([]byte("x"), 3*DefaultRecordSize)
	if _, err := e.Encrypt(long); err != nil {
		t.Errorf("a message over several records: %v", err)
	}
	if _, err := NewEncrypter(ua.PublicKey().Bytes()[:64], auth); err != ErrPublicKey {
		t.Errorf("short p256dh: %v", err)
	}
}

// A Decrypter reads messages from changing sender keys (a fresh one per
// message, as the web-push libraries send, and Encrypters' alternating),
// and refuses a message from another subscription or tampered with, after
// it has remembered a key.
func TestDecrypter(t *testing.T) {
	ua, auth := newSubscriber(t)
	pub := ua.PublicKey().Bytes()
	d, err := NewDecrypter(ua, auth)
	if err != nil {
		t.Fatal(err)
	}
	e1, _ := NewEncrypter(pub, auth)
	e2, _ := NewEncrypter(pub, auth)
	for i := range 6 {
		msg := []byte(fmt.Sprintf("message %d", i))
		var body []byte
		switch i % 3 {
		case 0:
			body, err = EncryptAES128GCM(msg, pub, auth)
		case 1:
			body, err = e1.Encrypt(msg)
		default:
			body, err = e2.Encrypt(msg)
		}
		if err != nil {
			t.Fatal(err)
		}
		if plain, err := d.Decrypt(body); err != nil || !bytes.Equal(plain, msg) {
			t.Fatalf("message %d: %q %v", i, plain, err)
		}
	}
	body, _ := e2.Encrypt([]byte("tampered"))
	body[len(body)-1] ^= 1
	if _, err := d.Decrypt(body); err == nil {
		t.Error("a tampered message decrypted")
	}
	other, otherAuth := newSubscriber(t)
	e3, _ := NewEncrypter(other.PublicKey().Bytes(), otherAuth)
	body, _ = e3.Encrypt([]byte("not for this one"))
	if _, err := d.Decrypt(body); err == nil {
		t.Error("another subscription's message decrypted")
	}
	if _, err := NewDecrypter(ua, auth[:15]); err != ErrAuthSecret {
		t.Errorf("short auth secret: %v", err)
	}
}

func BenchmarkEncrypter(b *testing.B) {
	ua, auth := newSubscriber(b)
	e, err := NewEncrypter(ua.PublicKey().Bytes(), auth)
	if err != nil {
		b.Fatal(err)
	}
	msg := make([]byte, 512)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.Encrypt(msg); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecrypter(b *testing.B) {
	ua, auth := newSubscriber(b)
	e, _ := NewEncrypter(ua.PublicKey().Bytes(), auth)
	body, _ := e.Encrypt(make([]byte, 512))
	d, _ := NewDecrypter(ua, auth)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := d.Decrypt(body); err != nil {
			b.Fatal(err)
		}
	}
}
