package receiptwire

import (
	"encoding/json"
	"testing"
)

// The bodies are docs/receipts.md's examples, key for key.
func TestBodies(t *testing.T) {
	for _, c := range []struct {
		v    any
		want string
	}{
		{List{Receipts: []Receipt{
			{ID: "r1", MessageID: "m1", Location: "https://push.example.com/m/m1", State: "delivered", Delivered: true, At: 1764330000123},
			{ID: "r2", MessageID: "m2", Location: "https://push.example.com/m/m2", State: "dropped", Reason: "topic_replaced", At: 1764330000456},
		}}, `{"receipts":[` +
			`{"id":"r1","message_id":"m1","location":"https://push.example.com/m/m1","state":"delivered","delivered":true,"at":1764330000123},` +
			`{"id":"r2","message_id":"m2","location":"https://push.example.com/m/m2","state":"dropped","delivered":false,"reason":"topic_replaced","at":1764330000456}]}`},
		{Subscription{Receipts: "https://push.example.com/receipts/s"}, `{"receipts":"https://push.example.com/receipts/s"}`},
		{Subscription{Receipts: "u", Webhook: "https://app.example.com/receipts", WebhookSecret: "k"},
			`{"receipts":"u","webhook":"https://app.example.com/receipts","webhook_secret":"k"}`},
		{Ack{IDs: []string{"r1", "r2"}}, `{"ids":["r1","r2"]}`},
	} {
		b, err := json.Marshal(c.v)
		if err != nil || string(b) != c.want {
			t.Errorf("%T: %s %v, want %s", c.v, b, err, c.want)
		}
	}
}
