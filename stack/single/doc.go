// Package single is the single-node server, autopush
// (stack/cmd/autopush): both tiers in one process (package stack) with
// every setting of each, loaded as the tier binaries load theirs
// (internal/settings: defaults, a JSON file, AUTOPUSH__NAME variables,
// -name flags). It applies what the tier binaries apply around their
// tier: the engine's GC target, a CRYPTO_KEY kept in a file when asked
// (made on first start), the settings in effect logged at start, and a
// graceful stop (the connection node drains, then the API tier).
//
// It must never hold a default of its own for a tier's setting (those
// live in engine.DefaultConfig and apitier.DefaultConfig) nor wire the
// tiers itself (stack does); nor open a store: the main does
// (storage/open), so this package links no backend.
package single
