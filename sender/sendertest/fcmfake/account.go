package fcmfake

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
)

// Account is a test Google service account.
type Account struct {
	ProjectID    string
	ClientEmail  string
	PrivateKeyID string
	// TokenURI is where tokens are minted: the fake's /token.
	TokenURI string
	Key      *rsa.PrivateKey
}

// NewServiceAccount makes a service account of project with a fresh
// 2048-bit RSA key, minting tokens at tokenURI.
func NewServiceAccount(project, tokenURI string) (*Account, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, fmt.Errorf("fcmfake: account key: %w", err)
	}
	id := make([]byte, 20)
	rand.Read(id)
	return &Account{
		ProjectID: project, ClientEmail: "fcm-sender@" + project + ".iam.gserviceaccount.com",
		PrivateKeyID: hex.EncodeToString(id), TokenURI: tokenURI, Key: key,
	}, nil
}

// JSON is the account's key file, in Google's format.
func (a *Account) JSON() []byte {
	der, err := x509.MarshalPKCS8PrivateKey(a.Key)
	if err != nil {
		panic(err) // an RSA key always marshals
	}
	b, _ := json.MarshalIndent(map[string]string{
		"type":                        "service_account",
		"project_id":                  a.ProjectID,
		"private_key_id":              a.PrivateKeyID,
		"private_key":                 string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email":                a.ClientEmail,
		"client_id":                   "100000000000000000001",
		"auth_uri":                    "https://accounts.google.com/o/oauth2/auth",
		"token_uri":                   a.TokenURI,
		"auth_provider_x509_cert_url": "https://www.googleapis.com/oauth2/v1/certs",
	}, "", "  ")
	return b
}

// WriteFile writes the key file into dir and returns its path.
func (a *Account) WriteFile(dir string) (string, error) {
	p := filepath.Join(dir, a.ProjectID+"-"+a.PrivateKeyID[:8]+".json")
	if err := os.WriteFile(p, a.JSON(), 0o600); err != nil {
		return "", fmt.Errorf("fcmfake: account file: %w", err)
	}
	return p, nil
}
