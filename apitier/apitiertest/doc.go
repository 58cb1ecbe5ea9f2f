// Package apitiertest sends requests to the WebPush HTTP API and checks its
// answers, for the API tier's own tests and for the tests that run it
// behind a whole stack (stack/stacktest). It imports no tier, so both can
// use it.
//
// It must never be imported by non-test code.
package apitiertest
