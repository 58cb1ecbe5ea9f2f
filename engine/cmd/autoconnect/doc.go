// Command autoconnect runs a connection node: user agents' websockets on
// the public listener, the internal node API on its own. Settings come from
// flags, AUTOCONNECT__NAME variables and an optional JSON file (-help lists
// them). SIGTERM or SIGINT drains the node and exits 0.
//
// It must stay a small main: configuration, New, Start, the signal.
package main
