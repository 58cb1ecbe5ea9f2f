// Package webpush is what the engine and the API tier both need: endpoint
// tokens, protocol message types and the errno table. The tiers import it;
// it imports neither.
package webpush
