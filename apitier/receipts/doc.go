// Package receipts is the delivery receipts API of the endpoint node
// (RFC 8030 §5.1; docs/receipts.md): the receipt subscribe resource
// (POST /receipts), a receipt subscription's long-polling read
// (GET /receipts/{id}) and acknowledgement (POST /receipts/{id}/ack), and
// the push path's check of a Push-Receipt header. Each call is
// authorised by the application server's VAPID key (RFC 8292): a
// subscription is read and named by the key that created it only.
//
// The RFC delivers each receipt by HTTP/2 server push on a request the
// application server holds open; browsers and most HTTP clients no
// longer take server pushes, so receipts are read instead, by a GET that
// waits for the next one (long polling), and stay readable until
// acknowledged. Receipts are written by whichever node settles a
// message (storage.FateStore): the API tier for expiry, topic
// replacement and TTL 0; the connection node for an ack, an unsubscribe
// or a message-limit reset.
package receipts
