// Command loadtest measures the push service's capacity and latency: it
// starts the engines (autoconnect) and the endpoint (autoendpoint) itself,
// drives virtual user agents from forked worker processes, and writes a
// JSON and an HTML report.
//
//	go run ./loadtest/cmd/loadtest hold -uas 200000 -connect-rate 1500
//	go run ./loadtest/cmd/loadtest notify -rates 250,500,1000,2000
//	go run ./loadtest/cmd/loadtest stored -messages 100000
//	go run ./loadtest/cmd/loadtest churn -duration 100s
//	go run ./loadtest/cmd/loadtest broadcast -uas 10000 -push-rate 200
//	go run ./loadtest/cmd/loadtest capacity            # the standard profile -> docs/capacity.md
//	go run ./loadtest/cmd/loadtest floor               # a bare Go push transport's CPU per push
//
// `loadtest <scenario> -help` lists the scenario's flags. The exit status
// is 0 when the run passed, 1 when it measured a failure (a lost push, say),
// 2 when it could not run.
//
// It must stay a small main; it never talks to a non-loopback address it
// was not given.
package main
