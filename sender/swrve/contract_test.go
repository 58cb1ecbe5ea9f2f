package swrve_test

import (
	"testing"

	"github.com/autopush-go/autopush/sender/provider"
	"github.com/autopush-go/autopush/sender/provider/providertest"
	"github.com/autopush-go/autopush/sender/sendertest/swrvefake"
	"github.com/autopush-go/autopush/sender/swrve"
)

// TestContract: the Swrve client keeps the provider contract against the
// fake Swrve push API (HTTP/1.1), through a front that fails its
// connections. Swrve has no answer of its own: every 4xx and 5xx but the
// retry set fails, and it never says a device is gone.
func TestContract(t *testing.T) {
	providertest.Run(t, func(t *testing.T) *providertest.Harness {
		fake, err := swrvefake.Start()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { fake.Close() })
		front, url := providertest.StartFront(t, fake.URL())
		cfg := swrve.DefaultConfig()
		cfg.URL = url
		c, err := swrve.New(cfg, swrve.NewKeys(map[string]map[string]string{"Hello": {"IOS": "push-key-1"}}))
		if err != nil {
			t.Fatal(err)
		}
		held := make(chan struct{})
		t.Cleanup(func() { close(held) })
		return &providertest.Harness{
			Provider:     c,
			Notification: provider.Notification{ID: "p1", Platform: "IOS", PrototypeKey: "Hello", Token: "user-1", Message: "Hi"},
			Answer: func(a providertest.Answer) {
				fake.SetFaults(once(swrvefake.Fault{Status: a.Status, RetryAfter: a.RetryAfter, Body: a.Body}))
			},
			Hold: func() {
				fake.SetFaults(func(swrvefake.Received) swrvefake.Fault { return swrvefake.Fault{Until: held} })
			},
			Front: front,
		}
	})
}

// once answers the next request with f, and the others 200.
func once(f swrvefake.Fault) func(swrvefake.Received) swrvefake.Fault {
	used := make(chan struct{}, 1)
	used <- struct{}{}
	return func(swrvefake.Received) swrvefake.Fault {
		select {
		case <-used:
			return f
		default:
			return swrvefake.Fault{}
		}
	}
}
