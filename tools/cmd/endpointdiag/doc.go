// Command endpointdiag explains a push endpoint: it decrypts the token with
// the CRYPTO_KEY list and shows the uaid, channel and VAPID key hash it
// names, then the router record, whether the channel is registered, and the
// messages waiting in storage (given a UAID: the router record and the
// messages of every channel). For operators answering "why doesn't this
// subscription get its pushes?". The report is internal/endpointdiag's,
// which a live endpoint node also serves (GET /__endpoint__ on its
// metrics-listen): a live node's embedded data is locked, ask it instead.
//
//	endpointdiag -crypto-key "$CRYPTO_KEY" -data-dir ./data https://push.example.com/wpush/v2/gAAAA...
//	endpointdiag -storage scylla -cql-hosts db1:9042 -json <token>
//
// It must never write to storage.
package main
