// Package token holds what the service encrypts with its CRYPTO_KEY: the
// Fernet keys themselves (Keys, ParseKeys, GenerateKey), push endpoint
// tokens (Keys.MakeEndpoint, Keys.ParseToken, Endpoint) and message ids
// (Keys.MakeMessageID, Keys.ParseMessageID), all in the formats autopush-rs
// makes and reads, and the errno answers for tokens that do not parse;
// and keys for other secrets, derived from the first key (Keys.Derive).
//
// It must never import the tiers, and never log or echo a key or a token's
// plaintext; it imports vapid only for the VAPID key a v2 endpoint binds.
package token
