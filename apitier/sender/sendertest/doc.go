// Package sendertest holds the outbound sender's test doubles, each a
// package of its own: swrvefake, fcmfake and apnsfake, the third-party
// providers (Swrve, FCM, APNs) speaking their real wire protocols on
// 127.0.0.1, and fakelog, what they record of the requests they get.
//
// The tests and the load tester (its sender scenario, loadtest/outbound)
// use them; no service binary links them (stack/deps_test.go checks every
// cmd/ but the load tester's and the tools').
package sendertest
