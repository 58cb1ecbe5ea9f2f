package e2e

import (
	"crypto/ecdh"
	"crypto/rand"
	"encoding/base64"
	"testing"

	"github.com/autopush-go/autopush/apitier"
	"github.com/autopush-go/autopush/engine"
	et "github.com/autopush-go/autopush/engine/enginetest"
	"github.com/autopush-go/autopush/storage"
	"github.com/autopush-go/autopush/storage/embedded"
)

// service is both tiers in one process over one embedded store.
type service struct {
	store storage.Store
	node  *engine.Server
	api   *apitier.Server
	url   string // public base URL of endpoints
}

func startService(t *testing.T) *service {
	t.Helper()
	store, err := embedded.Open(embedded.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	addr := et.FreeAddr(t)
	acfg := apitier.DefaultConfig()
	acfg.Listen, acfg.EndpointURL, acfg.CryptoKey = addr, "http://"+addr, et.TestKey
	acfg.VersionFile = ""
	api, err := apitier.New(acfg, store, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := api.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { api.Shutdown(t.Context()) })
	ecfg := et.Config()
	ecfg.EndpointURL = acfg.EndpointURL
	node := et.Start(t, store, ecfg)
	return &service{store: store, node: node, api: api, url: acfg.EndpointURL}
}

// agent is a user agent's push keys (RFC 8291): what a browser hands the
// application server with the endpoint.
type agent struct {
	priv *ecdh.PrivateKey
	auth []byte
}

func newAgent(t *testing.T) *agent {
	t.Helper()
	priv, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	auth := make([]byte, 16)
	rand.Read(auth)
	return &agent{priv: priv, auth: auth}
}

func (a *agent) p256dh() string {
	return base64.RawURLEncoding.EncodeToString(a.priv.PublicKey().Bytes())
}
func (a *agent) authKey() string { return base64.RawURLEncoding.EncodeToString(a.auth) }
