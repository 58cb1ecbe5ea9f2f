// Package sendertest holds the outbound sender's test doubles, each a
// package of its own: swrvefake, fcmfake and apnsfake, the third-party
// providers (Swrve, FCM, APNs) speaking their real wire protocols on
// 127.0.0.1; fakelog, what they record of the requests they get; and
// tcpfault, a front that fails a fake's connections as a network can
// (refused, reset, hung).
//
// The tests and the load tester (its sender scenario, loadtest/outbound)
// use them; no service binary links them (stack/deps_test.go checks every
// cmd/ but the load tester's and the tools').
package sendertest
