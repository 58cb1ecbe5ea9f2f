// Package endpointdiag explains one push subscription from storage: what
// its endpoint token decrypts to (uaid, channel, VAPID key hash), the
// router record, whether the channel is registered, and the messages
// waiting. The endpointdiag command (tools/cmd/endpointdiag) prints it for
// a stopped node's data; the endpoint node serves it to operators on its
// metrics-listen (Route), so that a live node can be asked. Both print
// this package's Report, so their answers are the same by construction.
//
// It must never write to storage.
package endpointdiag
