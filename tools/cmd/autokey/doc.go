// Command autokey prints a new random CRYPTO_KEY: a Fernet key (32 bytes,
// url-safe base64 with padding), the same form autopush's autokey prints.
// Both tiers need the same value. To rotate, put the new key first and keep
// the old one after it (CRYPTO_KEY=new,old): new endpoints and message ids
// use the first key, and those made with any listed key keep working.
//
// It must never print anything but the key (scripts capture it).
package main
