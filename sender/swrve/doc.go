// Package swrve is a provider.Provider for a Swrve-style push API: one
// HTTP POST per notification to the push endpoint (Swrve's
// https://service.swrve.com/push, or eu-service.swrve.com) with the form
// fields push_key (the API key of the transactional campaign the
// message's prototype maps to), user (the device's Swrve user id) and
// message. The answer is JSON {"code": ..., "message": ...}; 2xx is sent,
// 429/500/502/503/504 retry (honouring Retry-After), anything else fails.
//
// The prototype-to-campaign mapping is a YAML file (keys.go: prototype,
// then platform, to push_key), reloaded on SIGHUP (Reload) and when the file changes.
//
// It must never import the sender or storage: it only speaks the
// provider contract. Swrve takes no dedup or collapse key, so Limits
// reports Dedup false and the sender applies its interrupted-send policy.
package swrve
