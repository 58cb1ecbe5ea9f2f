package receiptwire

// Receipt is one receipt as GET /receipts/{id} and the webhooks send it.
type Receipt struct {
	ID        string `json:"id"`
	MessageID string `json:"message_id"`
	Location  string `json:"location"` // the push's Location
	State     string `json:"state"`
	Delivered bool   `json:"delivered"`
	Reason    string `json:"reason,omitempty"`
	At        int64  `json:"at"` // ms since the epoch
}

// List is GET /receipts/{id}'s answer and a webhook POST's body: the
// unacknowledged receipts, oldest first.
type List struct {
	Receipts []Receipt `json:"receipts"`
}

// Subscription is POST /receipts's answer: the new subscription's URL,
// and with a webhook, the webhook and its signing secret (given once).
type Subscription struct {
	Receipts      string `json:"receipts"`
	Webhook       string `json:"webhook,omitempty"`
	WebhookSecret string `json:"webhook_secret,omitempty"`
}

// Ack is POST /receipts/{id}/ack's body: the ids of receipts read.
type Ack struct {
	IDs []string `json:"ids"`
}
