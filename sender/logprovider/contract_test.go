package logprovider_test

import (
	"path/filepath"
	"testing"

	"github.com/autopush-go/autopush/sender/logprovider"
	"github.com/autopush-go/autopush/sender/provider"
	"github.com/autopush-go/autopush/sender/provider/providertest"
)

// TestContract: the log provider keeps the provider contract. It calls
// no service (no answers, no network to fail); its transport is its
// file, and a file it can no longer write retries the send.
func TestContract(t *testing.T) {
	providertest.Run(t, func(t *testing.T) *providertest.Harness {
		p, err := logprovider.New(logprovider.Config{File: filepath.Join(t.TempDir(), "pushes.log")})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		return &providertest.Harness{
			Provider:     p,
			Notification: provider.Notification{ID: "p1", Platform: "IOS", PrototypeKey: "Hello", Token: "user-1", Message: "Hi"},
			Break:        func() { p.Close() },
		}
	})
}
