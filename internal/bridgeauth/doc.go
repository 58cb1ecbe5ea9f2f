// Package bridgeauth makes and checks the registration secrets of the
// bridge registration API (/v1/{type}/{app_id}/registration...): the
// secret of a UAID is the lower-case hex HMAC-SHA256, keyed with one of
// the configured bridge auth keys (its bytes as written, not decoded),
// of the UAID as 32 lower-case hex digits without dashes. The reference
// (autopush and autopush-rs) computes the same value, so secrets it
// handed out verify here with the same keys.
//
// The first key signs new secrets; every key verifies, so keys rotate by
// putting the new one first and dropping the old one once clients have
// re-registered. It must never log, return or compare secrets in any way
// other than in constant time; it knows nothing of HTTP routes or storage.
package bridgeauth
