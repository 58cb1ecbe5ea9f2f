package apitier

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/autopush-go/autopush/internal/devcert"
)

// TestTLSListen: tls-listen serves the same API over https as listen
// over http (a push accepted on either), for a client that trusts the
// certificate's CA; a connection that never finishes its handshake is
// closed at the request deadline; missing certificate files fail the
// start naming the settings.
func TestTLSListen(t *testing.T) {
	f, _, err := devcert.Ensure(filepath.Join(t.TempDir(), "tls"))
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t, newStore(t), func(c *Config) {
		c.TLSListen, c.TLSCertFile, c.TLSKeyFile = "127.0.0.1:0", f.Cert, f.Key
		quick(c)
	})
	if s.TLSAddr() == "" || s.TLSAddr() == s.Addr() {
		t.Fatalf("tls-listen at %q, listen at %q", s.TLSAddr(), s.Addr())
	}
	roots := x509.NewCertPool()
	ca, _ := os.ReadFile(f.CA)
	roots.AppendCertsFromPEM(ca)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	u := subscribe(t, s, "", nil)
	for _, base := range []string{"https://" + s.TLSAddr(), "http://" + s.Addr()} {
		req, _ := http.NewRequest("POST", base+u.path, strings.NewReader("x"))
		req.Header.Set("TTL", "60")
		req.Header.Set("Content-Encoding", "aes128gcm")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("push over %s: %v", base, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("push over %s: %d", base, resp.StatusCode)
		}
	}
	if n := len(stored(t, s, u.uaid)); n != 2 {
		t.Fatalf("stored %d pushes, want one over each listener", n)
	}
	// A client that trusts nothing refuses the certificate: it is not a
	// public one.
	if _, err := http.Get("https://" + s.TLSAddr() + "/__heartbeat__"); err == nil {
		t.Fatal("a client without the CA accepted the development certificate")
	}

	// Connected, no ClientHello: closed at the request deadline.
	c, err := net.Dial("tcp", s.TLSAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	start := time.Now()
	if _, err := io.ReadAll(c); err != nil {
		t.Fatalf("a stalled handshake was not closed by the server: %v after %v", err, time.Since(start))
	}

	bad := newServer(t, newStore(t), func(c *Config) {
		c.TLSListen, c.TLSCertFile, c.TLSKeyFile = "127.0.0.1:0", f.Cert+".missing", f.Key
	})
	if err := bad.Start(); err == nil || !strings.Contains(err.Error(), "tls-cert-file") {
		t.Fatalf("start with a missing certificate: %v", err)
	}
	if err := (func() error { c := testConfig(); c.TLSListen = "127.0.0.1:0"; return c.Validate() })(); err == nil ||
		!strings.Contains(err.Error(), "tls-cert-file") {
		t.Fatalf("tls-listen without files: %v", err)
	}
}
