package devcert

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"testing"
)

// TestEnsure: the certificate is made once and kept, its key 0600; a
// client trusting only ca.pem verifies it for every loopback name and
// for no other; the CA is limited to those names and its key is not on
// disk; a damaged certificate is made again.
func TestEnsure(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tls")
	f, made, err := Ensure(dir)
	if err != nil || !made {
		t.Fatalf("first Ensure: made %v, %v", made, err)
	}
	if fi, err := os.Stat(f.Key); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v, want 0600", fi, err)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("directory: %v %v, want 0700", fi, err)
	}
	cert, _ := os.ReadFile(f.Cert)
	if again, made, err := Ensure(dir); err != nil || made || again != f {
		t.Fatalf("second Ensure: made %v, %v", made, err)
	}
	if kept, _ := os.ReadFile(f.Cert); !bytes.Equal(kept, cert) {
		t.Fatal("the second Ensure changed the certificate")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 3 {
		t.Fatalf("%d files in the directory, want ca.pem, cert.pem, key.pem only (no CA key)", len(entries))
	}

	pair, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	caPEM, _ := os.ReadFile(f.CA)
	if !roots.AppendCertsFromPEM(caPEM) {
		t.Fatal("ca.pem holds no certificate")
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{pair}})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.(*tls.Conn).Handshake()
			c.Close()
		}
	}()
	for name, want := range map[string]bool{"localhost": true, "127.0.0.1": true, "push.example.com": false} {
		c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: roots, ServerName: name})
		if (err == nil) != want {
			t.Errorf("handshake as %s: %v, want success %v", name, err, want)
		}
		if err == nil {
			c.Close()
		}
	}
	block, _ := pem.Decode(caPEM)
	ca, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if !ca.IsCA || !ca.PermittedDNSDomainsCritical || len(ca.PermittedDNSDomains) != 1 || len(ca.PermittedIPRanges) != 2 {
		t.Fatalf("CA constraints: CA %v, DNS %v, IPs %v", ca.IsCA, ca.PermittedDNSDomains, ca.PermittedIPRanges)
	}
	for _, ip := range IPs {
		ok := false
		for _, r := range ca.PermittedIPRanges {
			ok = ok || r.Contains(ip)
		}
		if !ok || ca.PermittedIPRanges[0].Contains(net.IPv4(10, 0, 0, 1)) {
			t.Fatalf("CA IP ranges %v", ca.PermittedIPRanges)
		}
	}

	// A truncated certificate (a crash mid-write) is made again.
	os.WriteFile(f.Cert, cert[:len(cert)/4], 0o644)
	if _, made, err := Ensure(dir); err != nil || !made {
		t.Fatalf("after damage: made %v, %v", made, err)
	}
}
