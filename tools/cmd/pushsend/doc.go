// Command pushsend is an application server in a box, for operators'
// smoke tests of a push service (this one, or any RFC 8030 service):
//
//	pushsend keys                       a new VAPID key pair (JSON)
//	pushsend send -sub SUB.json ...     encrypt (RFC 8291), sign (RFC 8292),
//	                                    POST to the endpoint, print the answer
//	pushsend smoke -ws wss://push...    play the user agent too: subscribe over
//	                                    the websocket, push, receive, decrypt
//	pushsend listen [-vapid-key KEY]    a test user agent: print a subscription's
//	                                    JSON, then each message decrypted; its
//	                                    identity kept in a state file
//
// Every command takes -h. Exit status: 0 when the push was accepted (and,
// for smoke, received; for listen, interrupted or -count messages received),
// 1 when it was not, 2 for bad usage.
//
// It must never send anywhere but the endpoint it is given.
package main
