// Package provider is the contract between the outbound sender and the
// third-party push services it sends through (Swrve-style push APIs now;
// FCM and APNs bridges next): what one notification is, what a provider
// declares about itself (rate limit, latency, timeout, whether it takes a
// dedup key), and the verdict of one send, with the provider's own error
// code and message and its Retry-After.
//
// It holds types, and the few helpers every provider shares: reading an
// answer (Retry-After, a send without answer) and keeping device tokens
// out of what a send returns (token.go); it must never import the
// sender, a provider, a tier or storage, so that every provider and the
// sender can import it. Every provider's tests run the contract's suite,
// providertest, against the provider's fake.
package provider
