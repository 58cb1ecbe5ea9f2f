// Package appserver is the application server the load tester plays: it
// posts pushes to its worker's own user agents through the endpoint
// (autoendpoint), as the web-push libraries do: aes128gcm-encrypted
// (RFC 8291, a fresh application-server key pair per push) and
// VAPID-signed (RFC 8292, a new ES256 JWT per push unless told to reuse
// one), each POST from a 127.0.0.x source.
//
// The schedule is open loop: every push has a send time fixed in advance,
// goes out then on its own goroutine, and its latency counts from that
// time. It must never wait for the server to pace the offered rate (a push
// over the in-flight cap is counted as an error, not delayed), and never
// post to an endpoint a user agent of this run did not register.
package appserver
