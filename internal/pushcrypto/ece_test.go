package pushcrypto

import (
	"bytes"
	"crypto/ecdh"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"strconv"
	"testing"
)

// RFC 8291 Appendix A, verbatim (base64url, unpadded).
const (
	rfcPlaintext  = "When I grow up, I want to be a watermelon"
	rfcASPrivate  = "yfWPiYE-n46HLnH0KqZOF1fJJU3MYrct3AELtAQ-oRw"
	rfcASPublic   = "BP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A8"
	rfcUAPrivate  = "q1dXpw3UpT5VOmu_cf_v6ih07Aems3njxI-JWgLcM94"
	rfcUAPublic   = "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4"
	rfcAuthSecret = "BTBZMqHH6r4Tts7J_aSIgg"
	rfcSalt       = "DGv6ra1nlYgDCS1FRnbzlw"
	rfcECDH       = "kyrL1jIIOHEzg3sM2ZWRHDRB62YACZhhSlknJ672kSs"
	rfcIKM        = "S4lYMb_L0FxCeq0WhDx813KgSYqU26kOyzWUdsXYyrg"
	rfcCEK        = "oIhVW04MRdy2XN9CiKLxTg"
	rfcNonce      = "4h_95klXJ5E_qnoN"
	rfcBody       = "DGv6ra1nlYgDCS1FRnbzlwAAEABBBP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A_yl95bQpu6cVPTpK4Mqgkf1CXztLVBSt2Ks3oZwbuwXPXLWyouBWLVWGNWQexSgSxsj_Qulcy4a-fN"
)

func b64T(t testing.TB, s string) []byte {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		t.Fatalf("base64 %q: %v", s, err)
	}
	return b
}

func hexT(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func keyT(t testing.TB, raw []byte) *ecdh.PrivateKey {
	t.Helper()
	k, err := ecdh.P256().NewPrivateKey(raw)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func newSubscriber(t testing.TB) (*ecdh.PrivateKey, []byte) {
	t.Helper()
	k, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	auth := make([]byte, AuthSecretLen)
	rand.Read(auth)
	return k, auth
}

func TestECERFC8291Vector(t *testing.T) {
	as := keyT(t, b64T(t, rfcASPrivate))
	ua := keyT(t, b64T(t, rfcUAPrivate))
	if !bytes.Equal(as.PublicKey().Bytes(), b64T(t, rfcASPublic)) {
		t.Fatal("as_public does not match as_private")
	}
	uaPublic := b64T(t, rfcUAPublic)
	if !bytes.Equal(ua.PublicKey().Bytes(), uaPublic) {
		t.Fatal("ua_public does not match ua_private")
	}
	auth, salt := b64T(t, rfcAuthSecret), b64T(t, rfcSalt)

	// Intermediate values.
	secret, err := as.ECDH(ua.PublicKey())
	if err != nil {
		t.Fatal(err)
	}
	if got := base64.RawURLEncoding.EncodeToString(secret); got != rfcECDH {
		t.Fatalf("ecdh_secret %s", got)
	}
	ikm := webPushIKM(secret, auth, uaPublic, as.PublicKey().Bytes())
	if got := base64.RawURLEncoding.EncodeToString(ikm); got != rfcIKM {
		t.Fatalf("IKM %s", got)
	}
	cek, nonce, err := derive128(ikm, salt)
	if err != nil {
		t.Fatal(err)
	}
	if got := base64.RawURLEncoding.EncodeToString(cek); got != rfcCEK {
		t.Fatalf("CEK %s", got)
	}
	if got := base64.RawURLEncoding.EncodeToString(nonce[:]); got != rfcNonce {
		t.Fatalf("NONCE %s", got)
	}

	// Encryption with the RFC's salt and sender key is byte for byte.
	body, err := EncryptAES128GCM([]byte(rfcPlaintext), uaPublic, auth, Salt(salt), SenderKey(as))
	if err != nil {
		t.Fatal(err)
	}
	if got := base64.RawURLEncoding.EncodeToString(body); got != rfcBody {
		t.Fatalf("body\n got %s\nwant %s", got, rfcBody)
	}

	// And the user agent reads the RFC's body.
	plain, err := DecryptAES128GCM(b64T(t, rfcBody), ua, auth)
	if err != nil || string(plain) != rfcPlaintext {
		t.Fatalf("decrypt: %q, %v", plain, err)
	}
}

// ecec's aes128gcm Web Push vector with rs = 24: three records.
func TestECEAES128GCMMultiRecordVector(t *testing.T) {
	ua := keyT(t, hexT(t, "c899d11d32e2b7e6fe7498786f50f23b98ace5397ad261de39ba6449ecc12cad"))
	auth := hexT(t, "996fad8b50aa2d02b83f26412b2e2aee")
	body := hexT(t, "495ce6c8de93a4539e862e8634993cbb0000001841043c3378a2c0ab954e1498718e85f08bb723fb7d25e135a663fe385884eb8192336bf90a54ed720f1c045c0b405e9bbc3a2142b16c89086734c374ebaf7099e6427e2d32c8ada5018703c54b10b481e1027d7209d8c6b43553fa133afa597f2ddc45a5ba8140944e6490bb8d6d99ba1d02e60d95f48ce644477c17231d95b97a4f95dd")
	plain, err := DecryptAES128GCM(body, ua, auth)
	if err != nil || string(plain) != "I am the walrus" {
		t.Fatalf("got %q, %v", plain, err)
	}
}

// ecec's RFC 8188 (no Web Push key derivation: IKM given) error vectors,
// through the record layer DecryptAES128GCM uses.
func TestECEAES128GCMRecordErrors(t *testing.T) {
	for _, tc := range []struct {
		desc, ikm, payload string
		want               error
	}{
		{"zero plaintext", "64c70e64a725551451f208dfbaa0b972", "aad2057d3353b7ff37bde42ae1d50fda0000002000bbc7b965760bf0662b93f4e5d694b765f0cd159b2801a5", ErrPadding},
		{"bad early padding delimiter", "64c70e64a725551451f208dfbaa0b972", "aad2057d3353b7ff37bde42ae1d50fda0000002000b9c7b965760bf09e42b108433875a306c978060afc7c7de95285918b580260f345387a28e525662f48c1c33204b195b54e9e70d40e3cf3ef0c671be014497edc", ErrPadding},
		// ecec calls it a padding error; RFC 8188 §2 calls a final
		// delimiter 1 truncation.
		{"bad final padding delimiter", "64c70e64a725551451f208dfbaa0b972", "aad2057d3353b7ff37bde42ae1d50fda0000002000bac7b965760bf09e42b1084a69e4501b8d49dbc679234d47c25716", ErrTruncated},
		{"invalid auth tag", "64c70e64a725551451f208dfbaa0b972", "aad2057d3353b7ff37bde42ae1d50fda0000002000bbc6b11d463a7e0f072bbeaa44e0d62e4be5f95d25e38671e07d", ErrDecrypt},
		{"rs 21, last record without delimiter", "1a5c056416df8373875101d111984783", "5306dc45dd8e510016533c1ebae550530000001500a70d924ee608d0c1c100885ae8781dd14767021263f79d22a9448db2336ee0e572e23c384970", ErrPadding},
		{"rs 21, last record a bare tag", "c1c9c0919d810ae7d9e80c45bc21a9fa", "c1af29076f692560de6d1fde021169790000001500469fde73a78a2a661db0f1ae55ecec866aaae5f304a33ec3b0bb16e90aabc4bae0edbb7346", ErrTruncated},
	} {
		p := hexT(t, tc.payload)
		if p[20] != 0 {
			t.Fatalf("%s: idlen %d", tc.desc, p[20])
		}
		aead, nonce, err := keys128(hexT(t, tc.ikm), p[:16])
		if err != nil {
			t.Fatal(err)
		}
		_, err = open128(aead, nonce, p[21:], binary.BigEndian.Uint32(p[16:20]))
		if err != tc.want {
			t.Errorf("%s: got %v, want %v", tc.desc, err, tc.want)
		}
	}
}

func TestECEAES128GCMRoundTrip(t *testing.T) {
	ua, auth := newSubscriber(t)
	pub := ua.PublicKey().Bytes()
	for _, tc := range []struct {
		n, rs, pad int
		records    int
	}{
		{0, 0, 0, 1},
		{1, 0, 0, 1},
		{41, 0, 0, 1},
		{4079, 0, 0, 1}, // the largest single 4096-byte record
		{4080, 0, 0, 2},
		{3000, 0, 1079, 1},
		{100, 18, 0, 100}, // one octet a record
		{10, 27, 0, 1},    // exactly one full record
		{11, 27, 0, 2},
		{15, 27, 5, 2},
	} {
		plain := make([]byte, tc.n)
		rand.Read(plain)
		var opts []Option
		if tc.rs != 0 {
			opts = append(opts, RecordSize(tc.rs))
		}
		if tc.pad != 0 {
			opts = append(opts, Padding(tc.pad))
		}
		body, err := EncryptAES128GCM(plain, pub, auth, opts...)
		if err != nil {
			t.Fatalf("%+v: %v", tc, err)
		}
		rs := tc.rs
		if rs == 0 {
			rs = DefaultRecordSize
		}
		if got := binary.BigEndian.Uint32(body[16:20]); int(got) != rs {
			t.Errorf("%+v: rs %d", tc, got)
		}
		if want := AES128GCMHeaderLen + tc.n + tc.pad + tc.records*17; len(body) != want {
			t.Errorf("%+v: body %d bytes, want %d", tc, len(body), want)
		}
		got, err := DecryptAES128GCM(body, ua, auth)
		if err != nil || !bytes.Equal(got, plain) {
			t.Fatalf("%+v: round trip: %v", tc, err)
		}
	}
	// Two encryptions of one message differ (fresh salt and sender key).
	a, _ := EncryptAES128GCM([]byte("x"), pub, auth)
	b, _ := EncryptAES128GCM([]byte("x"), pub, auth)
	if bytes.Equal(a[:16], b[:16]) || bytes.Equal(a[21:86], b[21:86]) {
		t.Error("salt or sender key reused")
	}
}

func TestECEAES128GCMRejects(t *testing.T) {
	ua, auth := newSubscriber(t)
	pub := ua.PublicKey().Bytes()
	plain := []byte("a message long enough to span records at rs 20")
	body, err := EncryptAES128GCM(plain, pub, auth, RecordSize(20))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := DecryptAES128GCM(body, ua, auth); err != nil {
		t.Fatal(err)
	}
	mut := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), body...)) }
	other, _ := newSubscriber(t)
	wrongAuth := append([]byte(nil), auth...)
	wrongAuth[0] ^= 1
	for _, tc := range []struct {
		name string
		body []byte
		ua   *ecdh.PrivateKey
		auth []byte
		want error
	}{
		{"tampered ciphertext", mut(func(b []byte) []byte { b[len(b)-20] ^= 1; return b }), ua, auth, ErrDecrypt},
		{"tampered tag", mut(func(b []byte) []byte { b[len(b)-1] ^= 1; return b }), ua, auth, ErrDecrypt},
		{"tampered salt", mut(func(b []byte) []byte { b[0] ^= 1; return b }), ua, auth, ErrDecrypt},
		{"wrong auth secret", body, ua, wrongAuth, ErrDecrypt},
		{"wrong private key", body, other, auth, ErrDecrypt},
		{"short auth secret", body, ua, auth[:15], ErrAuthSecret},
		{"nil key", body, nil, auth, ErrPrivateKey},
		{"header only", body[:AES128GCMHeaderLen], ua, auth, ErrTruncated},
		{"short header", body[:85], ua, auth, ErrHeader},
		{"idlen 0", mut(func(b []byte) []byte { b[20] = 0; return b }), ua, auth, ErrHeader},
		{"keyid off the curve", mut(func(b []byte) []byte { b[40] ^= 1; return b }), ua, auth, ErrHeader},
		{"rs 17", mut(func(b []byte) []byte { binary.BigEndian.PutUint32(b[16:], 17); return b }), ua, auth, ErrRecordSize},
		{"rs changed", mut(func(b []byte) []byte { binary.BigEndian.PutUint32(b[16:], 21); return b }), ua, auth, ErrDecrypt},
		// Cut at a record boundary: the last record left has delimiter 1.
		{"last record dropped", body[:len(body)-(len(body)-AES128GCMHeaderLen)%20], ua, auth, ErrTruncated},
		{"last record a bare tag", append(body[:len(body)-(len(body)-AES128GCMHeaderLen)%20:len(body)-(len(body)-AES128GCMHeaderLen)%20], make([]byte, 16)...), ua, auth, ErrTruncated},
		{"trailing byte", append(append([]byte(nil), body...), 0), ua, auth, ErrDecrypt},
	} {
		if _, err := DecryptAES128GCM(tc.body, tc.ua, tc.auth); err != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.want)
		}
	}

	// A record whose delimiter is 2 but which is not the last.
	as, _ := ecdh.P256().GenerateKey(rand.Reader)
	salt := make([]byte, 16)
	two, _ := EncryptAES128GCM([]byte("ab"), pub, auth, RecordSize(18), Salt(salt), SenderKey(as))
	one, _ := EncryptAES128GCM([]byte("a"), pub, auth, RecordSize(18), Salt(salt), SenderKey(as))
	// one's only record (delimiter 2) followed by two's second record.
	forged := append(append([]byte(nil), one...), two[AES128GCMHeaderLen+18:]...)
	if _, err := DecryptAES128GCM(forged, ua, auth); err != ErrPadding {
		t.Errorf("delimiter 2 before the end: %v", err)
	}

	// Encryption argument checks.
	for _, tc := range []struct {
		name       string
		pub, auth  []byte
		opts       []Option
		want       error
		plaintextN int
	}{
		{"public key short", pub[:64], auth, nil, ErrPublicKey, 1},
		{"public key off curve", append([]byte{4}, make([]byte, 64)...), auth, nil, ErrPublicKey, 1},
		{"auth secret short", pub, auth[:8], nil, ErrAuthSecret, 1},
		{"salt short", pub, auth, []Option{Salt(make([]byte, 15))}, ErrSalt, 1},
		{"rs 17", pub, auth, []Option{RecordSize(17)}, ErrRecordSize, 1},
		{"padding too large", pub, auth, []Option{Padding(4080)}, ErrTooLarge, 0},
		{"padding negative", pub, auth, []Option{Padding(-1)}, ErrPadding, 0},
		{"X25519 sender", pub, auth, []Option{SenderKey(x25519Key(t))}, ErrPrivateKey, 1},
	} {
		if _, err := EncryptAES128GCM(make([]byte, tc.plaintextN), tc.pub, tc.auth, tc.opts...); err != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.want)
		}
	}
}

func x25519Key(t testing.TB) *ecdh.PrivateKey {
	k, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// ecec's aesgcm Web Push vectors, given as the headers a sender sends.
func TestECEAESGCMVectors(t *testing.T) {
	for _, tc := range []struct {
		desc, plaintext, key, auth, body, cryptoKey, encryption string
	}{
		{"rs 24", "Some message", "e21db71bf2a45c2f53bc148adafd10ec89a94b6600b9177c850c8dd2b140c018", "6930dce8979bcd1e9e49ccb6a0ba3845", "3a8df8c3617d5559d33057cab5dc78f0065643d2e2f4ce836ae5895605d4", `dh=BCHFVrflyxibGLlgztLwKelsRZp4gqX3tNfAKFaxAcBhpvYeN1yIUMrxaDKiLh4LNKPtj0BOXGdr-IQ-QP82Wjo`, `salt=zCU18Rw3A5aB_Xi-vfixmA; rs=24`},
		{"rs 8, pad 16", "Yet another message", "e21db71bf2a45c2f53bc148adafd10ec89a94b6600b9177c850c8dd2b140c018", "ea99706674a95546c5ec03c35eeb3751", "b840b907fb51f9fb90ddd7a541caf3ac30a9e345ba8a93198c667bf14483279b0c8fee9b00e546dc02ba26a165f44e80a16881618bcc65fc13855c660e7c3a447b5578b2853390d6825d44c243a88701f61218830f480cde2a3e77bf562b338f644f6b0d6512bfae09b2d22649f5ff00341f001aef6d991e696c61e77106e7d40c38494526a1ee7b874c511a6c3178", `dh=BEaA4gzA3i0JDuirGhiLgymS4hfFX7TNTdEhSk_HBlLpkjgCpjPL5c-GL9uBGIfa_fhGNKKFhXz1k9Kyens2ZpQ`, `salt=ZFhzj0S-n29g9P2p4-I7tA; rs=8`},
		{"rs 3", "Small record size", "e21db71bf2a45c2f53bc148adafd10ec89a94b6600b9177c850c8dd2b140c018", "836ad6547502a54c6070bf53cfbbf279", "a18e1ee5e0dab4356dd9fa50ca5c5b3c933edefadf8436ac7cf73c4353d6b78b4f7cc55bcffb0334bfdcbebd035d791d1734b5971b09b23e79d144b1e0c325d358a18c89970a3af0f51e7116016b080a890f71b05c0d6fcd2e13e72bc655b529dd29dd303753d4e09c1287d39fb542eb167eccff2bcd241f0c2041c663d4ece212cebf19e07cb31421897817ea899ef251f365285d71e54699e17ea253f4d7c792a5432feda15d5d5d9d9e100307254712740aef07acd1a4574423175c1dc272a350486200184c3740232fff2095423d8fdbd821395bfea886560a07bc43c87f2088db96597020068cd47d270b5158cf0b7f32253a40522eb0ea95e05d459f7de9dd7b916b790a673052f52f81bedfcc2c23ff884883b374ef1022b5c7c66b5cd52e71cd8bbc6cca928028a7bc213075e1850a68a08518e3f2dd73456a340f5e2b1db40b3d1fdbd4fe52bc47894ed4bd366de289b3", `dh=BCg6ZIGuE2ZNm2ti6Arf4CDVD_8--aLXAGLYhpghwjl1xxVjTLLpb7zihuEOGGbyt8Qj0_fYHBP4ObxwJNl56bk`, `salt=5LIDBXbvkBvvb7ZdD-T4PQ; rs=3`},
		{"encryption-encoding-02 example", "I am the walrus", "f455a5d79fd05100160da0f7937979d19059409e1abb6ec5d55e05d2e2d20ff3", "476f6f20676f6f206727206a6f6f6221", "ea7a80414304f2136ac39277925f1ca55549ca55ca62a64e7ac7991bc52e78aa40", `keyid="dhkey"; dh="BNoRDbb84JGm8g5Z5CFxurSqsXWJ11ItfXEWYVLE85Y7CYkDjXsIEc4aqxYaQ1G8BqkXCJ6DPpDrWtdWj_mugHU"`, `keyid="dhkey"; salt="lngarbyKfMoi9Z75xYXmkg"`},
	} {
		salt, dh, rs, err := ParseAESGCMHeaders(tc.encryption, tc.cryptoKey)
		if err != nil {
			t.Fatalf("%s: headers: %v", tc.desc, err)
		}
		ua := keyT(t, hexT(t, tc.key))
		plain, err := DecryptAESGCM(hexT(t, tc.body), salt, dh, ua, hexT(t, tc.auth), RecordSize(rs))
		if err != nil || string(plain) != tc.plaintext {
			t.Errorf("%s: got %q, %v", tc.desc, plain, err)
		}
	}
}

func TestECEAESGCMErrorVectors(t *testing.T) {
	for _, tc := range []struct {
		desc, key, auth, body, cryptoKey, encryption string
		want                                         error
	}{
		{"rs 7, no trailer", "d9bbb8a5a38065b2f679fd6efb04f338db9321c0cf734d28d33509820e3a5d37", "4280e2d2eeaf72c9485492a2a2e5cc5f", "606e05f9bd3acb9f748519674acc3fbee3b0eb657d233f", `dh=BD_bsTUpxBMvSv8eksith3vijMLj44D4jhJjO51y7wK1ytbUlsyYBBYYyB5AAe5bnREA_WipTgemDVz00LiWcfM`, `salt=xKWvs_jWWeg4KOsot_uBhA; rs=7`, ErrTruncated},
		{"last record of 1 byte", "0a8b0444055782f4efa21ed492b442d95fa25e836cd1b5e57bd23af2ace495eb", "42d199798f0c41f09aabe5f028e54605", "26f5fd1ec27894be60ccff3fb8229ceacd7989121a3610f8a450a0ab9f9d7f06d4a8470d524aaf", `dh=BBNZNEi5Ew_ID5S4Y9jWBi1NeVDje6Mjs7SDLViUn6A8VAZj-6X3QAuYQ3j20BblqjwTgYst7PRnY6UGrKyLbmU`, `salt=ot8hzbwOo6CYe6ZhdlwKtg; rs=6`, ErrPadding},
		{"padding length beyond the record", "f65f9a85c04cf88d329306d68834bd291acf761caf4d9d12c4a88fa63d9a79a2", "80a1bf3faf9d7b9a72cd2f21c87fcdc9", "a1648e140f943b9a16abe908efd4476857f001e8cb8902780bb7939ab493065e2002b2d77f1ee567e6", `dh=BKe2IBO_cwmEzQyTVscSbQcj0Y3uBSzGZ_mHlANMciS8uGpb7U8_Bw7TNdlYfpwWDLd0cxM8YYWNDbNJ_p2Rp4o`, `salt=z7QJ6UR89SiFRkd4RsC4Vg; rs=6`, ErrPadding},
		{"non-zero padding", "233b9ac4ba852668d2bbc1a32c2a36a046836630c1bad5b89b84f4ab1d365ec3", "70ca56416e7c06ba436c9f0aa9b4bd8a", "41dbe38742e46572aeff51efbf9e83d2b39217a330c37cb417cc64c54365c15bb653589a90e514191b", `dh=BBicj01QI0ryiFzAaty9VpW_crgq9XbU1bOCtEZI9UNE6tuOgp4lyN_UN0N905ECnLWK5v_sCPUIxnQgOuCseSo`, `salt=SbkGHONbQBBsBcj9dLyIUw; rs=6`, ErrPadding},
		{"last record a bare tag", "9e1393f75ef5c6ea100491a4899ddaa93e6ac3f20b27de3f3cf89536ed4b1526", "deb5a1b11094fca75aa9f28f6dddf305", "0bbbb78f900be18ce1db2601fee98deadceb547c6bb7b0f96da4c45bd0c4d41937ba9f5f638c", `dh=BI38Qs_OhDmQIxbszc6Nako-MrX3FzAE_8HzxM1wgoEIG4ocxyF-YAAVhfkpJUvDpRyKW2LDHIaoylaZuxQfRhE`, `salt=QClh48OlvGpSjZ0Mg0e8rg; rs=6`, ErrTruncated},
	} {
		salt, dh, rs, err := ParseAESGCMHeaders(tc.encryption, tc.cryptoKey)
		if err != nil {
			t.Fatalf("%s: headers: %v", tc.desc, err)
		}
		ua := keyT(t, hexT(t, tc.key))
		if _, err := DecryptAESGCM(hexT(t, tc.body), salt, dh, ua, hexT(t, tc.auth), RecordSize(rs)); err != tc.want {
			t.Errorf("%s: got %v, want %v", tc.desc, err, tc.want)
		}
	}
}

func TestECEAESGCMRoundTrip(t *testing.T) {
	ua, auth := newSubscriber(t)
	pub := ua.PublicKey().Bytes()
	for _, tc := range []struct{ n, rs, pad int }{
		{0, 0, 0}, {1, 0, 0}, {4000, 0, 0}, {4094, 0, 0}, {4095, 0, 0},
		{17, 3, 0}, {19, 8, 5}, {12, 8, 0}, {100, 50, 10},
	} {
		plain := make([]byte, tc.n)
		rand.Read(plain)
		var opts []Option
		if tc.rs != 0 {
			opts = append(opts, RecordSize(tc.rs))
		}
		if tc.pad != 0 {
			opts = append(opts, Padding(tc.pad))
		}
		body, salt, dh, err := EncryptAESGCM(plain, pub, auth, opts...)
		if err != nil {
			t.Fatalf("%+v: %v", tc, err)
		}
		rs := tc.rs
		if rs == 0 {
			rs = DefaultRecordSize
		}
		got, err := DecryptAESGCM(body, salt, dh, ua, auth, RecordSize(rs))
		if err != nil || !bytes.Equal(got, plain) {
			t.Fatalf("%+v: round trip: %v", tc, err)
		}
		// The headers a sender would send parse back to the same values.
		enc := "salt=" + base64.RawURLEncoding.EncodeToString(salt) + ";rs=" + strconv.Itoa(rs)
		ck := `keyid="p256dh";dh="` + base64.URLEncoding.EncodeToString(dh) + `";p256ecdsa=x`
		s2, d2, rs2, err := ParseAESGCMHeaders(enc, ck)
		if err != nil || !bytes.Equal(s2, salt) || !bytes.Equal(d2, dh) || rs2 != rs {
			t.Fatalf("%+v: headers: %v", tc, err)
		}
		wrongAuth := append([]byte(nil), auth...)
		wrongAuth[0] ^= 1
		if _, err := DecryptAESGCM(body, salt, dh, ua, wrongAuth, RecordSize(rs)); err != ErrDecrypt {
			t.Errorf("%+v: wrong auth secret: %v", tc, err)
		}
		body[len(body)/2] ^= 0x80
		if _, err := DecryptAESGCM(body, salt, dh, ua, auth, RecordSize(rs)); err != ErrDecrypt {
			t.Errorf("%+v: tampered: %v", tc, err)
		}
	}
	if _, _, _, err := EncryptAESGCM(nil, pub, auth, RecordSize(2)); err != ErrRecordSize {
		t.Errorf("rs 2: %v", err)
	}
	if _, err := DecryptAESGCM(nil, make([]byte, 16), pub, ua, auth); err != ErrTruncated {
		t.Errorf("empty body: %v", err)
	}
}

func TestParseAESGCMHeaders(t *testing.T) {
	const dh = "BCHFVrflyxibGLlgztLwKelsRZp4gqX3tNfAKFaxAcBhpvYeN1yIUMrxaDKiLh4LNKPtj0BOXGdr-IQ-QP82Wjo"
	for _, tc := range []struct {
		enc, ck string
		ok      bool
		rs      int
	}{
		{"salt=zCU18Rw3A5aB_Xi-vfixmA", "dh=" + dh, true, 4096},
		{" salt = \"zCU18Rw3A5aB_Xi-vfixmA==\" , rs=100", "p256ecdsa=abc; dh=" + dh + "==", true, 100},
		{"SALT=zCU18Rw3A5aB/Xi+vfixmA", "DH=" + dh, true, 4096},
		{"", "dh=" + dh, false, 0},
		{"salt=zCU18Rw3A5aB_Xi-vfixmA", "", false, 0},
		{"salt=short", "dh=" + dh, false, 0},
		{"salt=zCU18Rw3A5aB_Xi-vfixmA;rs=2", "dh=" + dh, false, 0},
		{"salt=zCU18Rw3A5aB_Xi-vfixmA;rs=x", "dh=" + dh, false, 0},
		{"salt=zCU18Rw3A5aB_Xi-vfixmA", "dh=" + dh[:80], false, 0},
		{"salt=zCU18Rw3A5aB_Xi-vfixmA", "dh=B" + dh[2:] + "A", false, 0},
	} {
		_, _, rs, err := ParseAESGCMHeaders(tc.enc, tc.ck)
		if (err == nil) != tc.ok || (tc.ok && rs != tc.rs) {
			t.Errorf("%q / %q: rs %d, %v", tc.enc, tc.ck, rs, err)
		}
		if err != nil && !errors.Is(err, ErrParams) {
			t.Errorf("%q: error %v", tc.enc, err)
		}
	}
}

// FuzzDecryptAES128GCM: arbitrary bodies never panic, and whatever
// decrypts was produced by the sender (only the seeds can).
func FuzzDecryptAES128GCM(f *testing.F) {
	ua := keyT(f, b64T(f, rfcUAPrivate))
	auth := b64T(f, rfcAuthSecret)
	rfc := b64T(f, rfcBody)
	f.Add(rfc)
	for i := 0; i < len(rfc); i += 7 {
		f.Add(rfc[:i])
	}
	multi, _ := EncryptAES128GCM([]byte("spread over several records"), ua.PublicKey().Bytes(), auth, RecordSize(19))
	f.Add(multi)
	f.Add(append(append([]byte(nil), rfc[:16]...), 0, 0, 0, 18, 65))
	d, err := NewDecrypter(ua, auth)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		plain, err := DecryptAES128GCM(body, ua, auth)
		if err == nil && len(plain) > len(body) {
			t.Fatalf("plaintext longer than the body")
		}
		// The Decrypter (whose remembered key carries over from the
		// inputs before) agrees with DecryptAES128GCM on every input.
		plain2, err2 := d.Decrypt(body)
		if (err == nil) != (err2 == nil) || !bytes.Equal(plain, plain2) {
			t.Fatalf("Decrypter: %q %v; DecryptAES128GCM: %q %v", plain2, err2, plain, err)
		}
		// The legacy decoder must not panic on the same bytes either.
		if len(body) >= 16 {
			DecryptAESGCM(body[16:], body[:16], ua.PublicKey().Bytes(), ua, auth, RecordSize(int(body[0])+1))
		}
	})
}

func BenchmarkEncryptAES128GCM(b *testing.B) {
	ua, auth := newSubscriber(b)
	pub := ua.PublicKey().Bytes()
	plain := make([]byte, 1024)
	b.ReportAllocs()
	b.SetBytes(int64(len(plain)))
	for b.Loop() {
		if _, err := EncryptAES128GCM(plain, pub, auth); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecryptAES128GCM(b *testing.B) {
	ua, auth := newSubscriber(b)
	plain := make([]byte, 1024)
	body, err := EncryptAES128GCM(plain, ua.PublicKey().Bytes(), auth)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(plain)))
	for b.Loop() {
		if _, err := DecryptAES128GCM(body, ua, auth); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecryptAESGCM(b *testing.B) {
	ua, auth := newSubscriber(b)
	plain := make([]byte, 1024)
	body, salt, dh, err := EncryptAESGCM(plain, ua.PublicKey().Bytes(), auth)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(plain)))
	for b.Loop() {
		if _, err := DecryptAESGCM(body, salt, dh, ua, auth); err != nil {
			b.Fatal(err)
		}
	}
}
