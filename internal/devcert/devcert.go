// Package devcert makes the development certificate the quickstart
// serves https with: a CA of its own, able to sign only for the loopback
// names (name constraints), and a certificate it signed for 127.0.0.1,
// ::1 and localhost. The CA's private key is not kept, so trusting its
// certificate (NODE_EXTRA_CA_CERTS, REQUESTS_CA_BUNDLE, SSL_CERT_FILE)
// trusts this one certificate and nothing else.
package devcert

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// Files are the paths of a development certificate in its directory.
type Files struct {
	CA   string // the CA's certificate: what clients trust
	Cert string // the server's certificate, then the CA's
	Key  string // the server's private key (0600)
}

// In returns the paths in dir.
func In(dir string) Files {
	return Files{CA: filepath.Join(dir, "ca.pem"), Cert: filepath.Join(dir, "cert.pem"), Key: filepath.Join(dir, "key.pem")}
}

// validity of a development certificate: long enough not to expire
// under a developer, short of the 825 days some clients cap a
// certificate at.
const validity = 800 * 24 * time.Hour

// Ensure returns the certificate in dir, made there (dir 0700) when its
// files are missing; made says whether it was. A certificate that no
// longer loads, or expires within a day, is made again.
func Ensure(dir string) (f Files, made bool, err error) {
	f = In(dir)
	if usable(f) {
		return f, false, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return f, false, fmt.Errorf("devcert: %w", err)
	}
	caPEM, certPEM, keyPEM, err := generate(time.Now())
	if err != nil {
		return f, false, err
	}
	// The key first, so that a certificate on disk always has its key.
	for _, w := range []struct {
		path string
		data []byte
		mode os.FileMode
	}{{f.Key, keyPEM, 0o600}, {f.CA, caPEM, 0o644}, {f.Cert, append(certPEM, caPEM...), 0o644}} {
		if err := writeFile(w.path, w.data, w.mode); err != nil {
			return f, false, err
		}
	}
	return f, true, nil
}

// usable: the files load as a key pair valid for at least a day more.
func usable(f Files) bool {
	pair, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil || len(pair.Certificate) == 0 {
		return false
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return false
	}
	_, err = os.Stat(f.CA)
	return err == nil && time.Now().Add(24*time.Hour).Before(leaf.NotAfter)
}

func writeFile(path string, data []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return fmt.Errorf("devcert: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("devcert: %w", err)
	}
	return nil
}

// Names are the names the certificate is for.
var (
	DNSNames = []string{"localhost"}
	IPs      = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
)

// generate makes the CA and the server's certificate, PEM-encoded.
func generate(now time.Time) (caPEM, certPEM, keyPEM []byte, err error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("devcert: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("devcert: %w", err)
	}
	var ipNets []*net.IPNet
	for _, ip := range IPs {
		bits := 8 * len(ip.To16())
		if ip.To4() != nil {
			ip, bits = ip.To4(), 32
		}
		ipNets = append(ipNets, &net.IPNet{IP: ip, Mask: net.CIDRMask(bits, bits)})
	}
	ca := &x509.Certificate{
		SerialNumber:                serial(),
		Subject:                     pkix.Name{Organization: []string{"autopush-go development"}, CommonName: "autopush-go development CA (loopback only)"},
		NotBefore:                   now.Add(-time.Hour),
		NotAfter:                    now.Add(validity),
		KeyUsage:                    x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid:       true,
		IsCA:                        true,
		MaxPathLenZero:              true,
		PermittedDNSDomainsCritical: true,
		PermittedDNSDomains:         DNSNames,
		PermittedIPRanges:           ipNets,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("devcert: CA: %w", err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("devcert: CA: %w", err)
	}
	leaf := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{Organization: []string{"autopush-go development"}, CommonName: "localhost"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(validity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     DNSNames,
		IPAddresses:  IPs,
	}
	der, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("devcert: certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("devcert: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(errors.New("devcert: no randomness")) // crypto/rand does not fail on Linux
	}
	return n
}
