//go:build linux

package firefox

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	webpushgo "github.com/SherClockHolmes/webpush-go"

	et "github.com/autopush-go/autopush/engine/enginetest"
	"github.com/autopush-go/autopush/internal/proc"
	"github.com/autopush-go/autopush/tools/e2e/e2etest"
)

const tlsInstallHint = "nginx and certutil are needed for the TLS run: apt-get install -y nginx libnss3-tools (as root; make e2e does it), then make e2e"

// testCA is a certificate authority made for one run, and a server
// certificate it signed for 127.0.0.1 and localhost.
type testCA struct {
	caPEM, certPath, keyPath, caPath string
	pool                             *x509.CertPool
}

// newTestCA writes ca.pem, server.pem and server.key into dir.
func newTestCA(t *testing.T, dir string) *testCA {
	t.Helper()
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	et.Must(t, err, "CA key")
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "autopush-go e2e test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, MaxPathLenZero: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	et.Must(t, err, "CA certificate")
	caCert, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	et.Must(t, err, "server key")
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	et.Must(t, err, "server certificate")
	keyDER, err := x509.MarshalECPrivateKey(key)
	et.Must(t, err, "server key")
	ca := &testCA{caPath: filepath.Join(dir, "ca.pem"), certPath: filepath.Join(dir, "server.pem"), keyPath: filepath.Join(dir, "server.key"),
		pool: x509.NewCertPool()}
	ca.caPEM = string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}))
	ca.pool.AddCert(caCert)
	et.Must(t, os.WriteFile(ca.caPath, []byte(ca.caPEM), 0o644), "write ca.pem")
	// The chain nginx sends: the server's certificate, then the CA's.
	chain := append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), ca.caPEM...)
	et.Must(t, os.WriteFile(ca.certPath, chain, 0o644), "write server.pem")
	et.Must(t, os.WriteFile(ca.keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600), "write server.key")
	return ca
}

// client is an HTTP client that trusts only the run's CA.
func (ca *testCA) client() *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.pool}}}
}

// trustInProfile makes the profile's NSS database (cert9.db) and adds the
// CA to it as trusted for TLS servers, as a person would in Firefox's
// certificate manager; Firefox reads it at start.
func (ca *testCA) trustInProfile(t *testing.T, profile string) {
	t.Helper()
	certutil, err := exec.LookPath("certutil")
	e2etest.Require(t, err == nil, tlsInstallHint)
	for _, args := range [][]string{
		{"-N", "-d", "sql:" + profile, "--empty-password"},
		{"-A", "-d", "sql:" + profile, "-n", "autopush-go e2e test CA", "-t", "C,,", "-i", ca.caPath},
	} {
		if out, err := exec.Command(certutil, args...).CombinedOutput(); err != nil {
			t.Fatalf("certutil %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// siteConf returns ops/nginx/autopush.conf for this run: listening on
// 127.0.0.1:port with the run's certificate, in front of the server's
// websocket and API addresses. Each replaced line must be in the file, so
// the test runs the recipe as shipped, not a copy of it.
func siteConf(t *testing.T, port, plainPort, ws, api string, ca *testCA) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(e2etest.ModuleRoot(), "ops", "nginx", "autopush.conf"))
	et.Must(t, err, "read ops/nginx/autopush.conf")
	conf := string(b)
	for _, r := range [][2]string{
		{"listen 443 ssl;", "listen 127.0.0.1:" + port + " ssl;"},
		{"listen [::]:443 ssl;", ""},
		{"listen 80;", "listen 127.0.0.1:" + plainPort + ";"},
		{"listen [::]:80;", ""},
		{"server 127.0.0.1:8080;", "server " + ws + ";"},
		{"server 127.0.0.1:8082;", "server " + api + ";"},
		{"/etc/letsencrypt/live/push.example.com/fullchain.pem", ca.certPath},
		{"/etc/letsencrypt/live/push.example.com/privkey.pem", ca.keyPath},
	} {
		if strings.Count(conf, r[0]) != 1 {
			t.Fatalf("ops/nginx/autopush.conf has %d %q; the test replaces exactly one", strings.Count(conf, r[0]), r[0])
		}
		conf = strings.Replace(conf, r[0], r[1], 1)
	}
	return conf
}

// startNginx runs Debian's nginx in the foreground (its own process
// group: master and worker) with a generated main config that includes
// site, every path in dir; it is stopped by its PID when t ends.
func startNginx(t *testing.T, dir, site string) *proc.Proc {
	t.Helper()
	bin, err := exec.LookPath("nginx")
	if err != nil {
		bin, err = exec.LookPath("/usr/sbin/nginx")
	}
	e2etest.Require(t, err == nil, tlsInstallHint)
	// Workers may run as another user (nginx started by root): they must
	// reach the temp directories.
	et.Must(t, os.Chmod(dir, 0o755), "chmod nginx dir")
	et.Must(t, os.WriteFile(filepath.Join(dir, "site.conf"), []byte(site), 0o644), "write site.conf")
	main := fmt.Sprintf(`daemon off;
master_process on;
worker_processes 1;
pid %[1]s/nginx.pid;
error_log stderr notice;
events { worker_connections 256; }
http {
    access_log %[1]s/access.log;
    client_body_temp_path %[1]s/client_body;
    proxy_temp_path %[1]s/proxy;
    fastcgi_temp_path %[1]s/fastcgi;
    uwsgi_temp_path %[1]s/uwsgi;
    scgi_temp_path %[1]s/scgi;
    include %[1]s/site.conf;
}
`, dir)
	conf := filepath.Join(dir, "nginx.conf")
	et.Must(t, os.WriteFile(conf, []byte(main), 0o644), "write nginx.conf")
	if out, err := exec.Command(bin, "-t", "-p", dir, "-c", conf).CombinedOutput(); err != nil {
		t.Fatalf("nginx -t rejects the recipe: %v\n%s", err, out)
	}
	p, err := proc.Start(context.Background(), exec.Command(bin, "-p", dir, "-c", conf), proc.Config{Name: "nginx",
		LogPath: filepath.Join(dir, "nginx.log"), Group: true})
	et.Must(t, err, "start nginx")
	t.Cleanup(func() { p.Stop(10 * time.Second) })
	return p
}

// TestFirefoxTLS: the recipe for TLS in front (ops/nginx/autopush.conf,
// Debian's nginx) between a real Firefox and the single-node server.
// Firefox, trusting a CA made for the run and with no insecure-server
// pref, subscribes over wss:// through nginx, gets an https:// endpoint,
// and its service worker receives what web-push and webpush-go send to
// that endpoint through nginx.
func TestFirefoxTLS(t *testing.T) {
	if os.Getenv("AUTOPUSH_E2E_FIREFOX") != "1" {
		t.Skip("the real-Firefox run is make e2e (it sets AUTOPUSH_E2E_FIREFOX=1, installs firefox-esr, nginx and certutil); make test runs it")
	}
	ffBin := firefoxBinary(t)
	nodeDir := e2etest.WebPushNode(t)
	logs, err := os.MkdirTemp("", "autopush-e2e-tls-")
	et.Must(t, err, "log dir")
	t.Cleanup(func() {
		switch {
		case t.Failed():
			t.Logf("logs kept in %s", logs)
			t.Logf("---- tail of firefox.log ----\n%s", tail(filepath.Join(logs, "firefox.log"), 60))
			t.Logf("---- tail of nginx.log ----\n%s", tail(filepath.Join(logs, "nginx", "nginx.log"), 30))
		case os.Getenv("AUTOPUSH_E2E_KEEP_LOGS") == "":
			os.RemoveAll(logs)
		}
	})

	ngDir := filepath.Join(logs, "nginx")
	et.Must(t, os.MkdirAll(ngDir, 0o755), "nginx dir")
	ca := newTestCA(t, ngDir)
	_, port, _ := net.SplitHostPort(et.FreeAddr(t))
	_, plainPort, _ := net.SplitHostPort(et.FreeAddr(t))
	public := "127.0.0.1:" + port

	d := newServer(t, filepath.Join(logs, "bin"), logs)
	d.endpointURL = "https://" + public
	d.start(t, d.ws)
	ng := startNginx(t, ngDir, siteConf(t, port, plainPort, d.ws, d.http, ca))
	https := ca.client()
	et.Eventually(t, 30*time.Second, "nginx serving https://"+public, func() bool {
		select {
		case <-ng.Exited():
			t.Fatalf("nginx exited: %v\n%s", ng.Wait(), ng.Tail())
		default:
		}
		resp, err := https.Get("https://" + public + "/__lbheartbeat__")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	t.Logf("nginx (pid %d) on https://%s in front of ws %s and push API %s", ng.PID(), public, d.ws, d.http)
	// The API's routes through nginx; /metrics only on loopback.
	for path, want := range map[string]int{"/__heartbeat__": 200, "/health": 200, "/metrics": 404, "/no/such/route": 404} {
		resp, err := https.Get("https://" + public + path)
		et.Must(t, err, "GET "+path)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET https://%s%s: %d, want %d", public, path, resp.StatusCode, want)
		}
	}

	// Port 80's block sends everything to https.
	noFollow := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	plain, err := noFollow.Get("http://127.0.0.1:" + plainPort + "/__heartbeat__?x=1")
	et.Must(t, err, "GET over port 80's block")
	plain.Body.Close()
	if loc := plain.Header.Get("Location"); plain.StatusCode != http.StatusMovedPermanently || loc != "https://127.0.0.1/__heartbeat__?x=1" {
		t.Errorf("port 80: %d Location %q, want 301 to https://127.0.0.1/__heartbeat__?x=1", plain.StatusCode, loc)
	}

	pg := startPage(t)
	profile := filepath.Join(logs, "profile")
	writeProfile(t, profile, "wss://"+public+"/")
	ca.trustInProfile(t, profile)
	ff := launch(t, ffBin, profile, pg.url(), filepath.Join(logs, "firefox.log"))
	t.Logf("firefox started (pgid %d), push server wss://%s/", ff.p.PID(), public)

	s := &appServer{node: nodeDir}
	e2etest.NodeJSON(t, nodeDir, "keys.js", nil, &s.keys)
	if err := pg.do("subscribe", map[string]any{"key": s.keys.Public}, 90*time.Second, &s.sub); err != nil {
		t.Fatalf("subscribe over wss:// through nginx: %v", err)
	}
	if !strings.HasPrefix(s.sub.Endpoint, "https://"+public+"/wpush/v2/") {
		t.Fatalf("endpoint %s is not on the https:// push API through nginx", s.sub.Endpoint)
	}
	t.Logf("subscribed over wss://: %s", s.sub.Endpoint)

	// web-push (Node's https, trusting the CA through NODE_EXTRA_CA_CERTS)
	// and webpush-go (a client trusting only the CA).
	t.Setenv("NODE_EXTRA_CA_CERTS", ca.caPath)
	from := pg.mark()
	text := "over TLS from web-push ✓"
	res, err := s.npm(&text, "")
	if err != nil || res.Status != http.StatusCreated {
		t.Fatalf("web-push to the https:// endpoint: %+v %v", res, err)
	}
	resp, err := webpushgo.SendNotification([]byte("over TLS from webpush-go"), &webpushgo.Subscription{
		Endpoint: s.sub.Endpoint, Keys: webpushgo.Keys{P256dh: s.sub.Keys.P256dh, Auth: s.sub.Keys.Auth},
	}, &webpushgo.Options{HTTPClient: https, Subscriber: "ops@example.com", VAPIDPublicKey: s.keys.Public,
		VAPIDPrivateKey: s.keys.Private, TTL: 300})
	et.Must(t, err, "webpush-go")
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("webpush-go to the https:// endpoint: %d", resp.StatusCode)
	}
	expectPushes(t, pg, from, [][]byte{[]byte(text), []byte("over TLS from webpush-go")}, 30*time.Second)

	m, err := d.metrics()
	et.Must(t, err, "metrics")
	if m["autoconnect_hellos_total"] < 1 || m[`autoconnect_notifications_sent_total{source="direct"}`] < 2 {
		t.Errorf("the server counted %v hellos and %v direct notifications", m["autoconnect_hellos_total"],
			m[`autoconnect_notifications_sent_total{source="direct"}`])
	}
	// nginx carried both: the pushes (201) and the websocket upgrade
	// (101 on "/"), which it logs once the connection ends: Firefox goes.
	ff.stop()
	var access []byte
	et.Eventually(t, 30*time.Second, "nginx logging the websocket", func() bool {
		access, _ = os.ReadFile(filepath.Join(ngDir, "access.log"))
		return strings.Contains(string(access), `"GET / HTTP/1.1" 101`)
	})
	if !strings.Contains(string(access), `"POST /wpush/v2/`) || !strings.Contains(string(access), `" 201 `) {
		t.Errorf("nginx's access log has no push answered 201:\n%s", access)
	}
}
