# The interface CI and people share. `make help` lists the targets.
SHELL := /bin/bash
GO ?= go
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
FUZZTIME ?= 20s
# The schema-driven fuzzer of the hostile-input suite (docs/schemathesis_test.go),
# from PyPI, in a venv of its own under the user's cache.
SCHEMATHESIS_VERSION := 4.32.5
SCHEMATHESIS_VENV ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/autopush/schemathesis-$(SCHEMATHESIS_VERSION)
SCHEMATHESIS_EXAMPLES ?= 400
SCHEMATHESIS_SEED ?= $(shell date +%s)
BENCHTIME ?= 1s

.PHONY: help run build test test-stress test-unit e2e bench fuzz schemathesis lint node-deps py-deps pywebpush capacity million maxhold stall fanout sender-cluster sender-crash sender-stop burst sender-bench sender-flood bridge-bench drain-loop cluster cluster-down faults

help: ## list the targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

run: ## the single-node server on loopback over ./data (ws :8080, node API :8081, push API http :8082 and https :8443 with a dev certificate, metrics :8084; dev keys kept in ./data; pushes recorded in ./data/pushes.log)
	$(GO) run ./stack/cmd/autopush -connect-listen 127.0.0.1:8080 -router-listen 127.0.0.1:8081 \
	  -endpoint-listen 127.0.0.1:8082 -tls-listen 127.0.0.1:8443 -tls-dev-cert-dir ./data/tls \
	  -endpoint-url https://127.0.0.1:8443 \
	  -data-dir ./data/store -crypto-key-file ./data/crypto_key -drain-window 1s \
	  -push-api-key-file ./data/push_api_key -log-provider-file ./data/pushes.log

build: ## compile every package and binary
	$(GO) build ./...

.PHONY: dist dist-test
dist: ## static binaries (CGO_ENABLED=0, -trimpath) for linux/amd64 and linux/arm64 in dist/linux_*, and a .deb and an .rpm of each (nfpm, pinned); VERSION (default: git describe, ops/packaging/version.sh) names them
	bash ops/packaging/dist.sh

dist-test: ## make dist for this architecture, install the .deb with dpkg, run the unit's command as the unit would, pushsend smoke against it, purge it; read the .rpm (root on Debian; installs rpm; ~3 min)
	bash ops/packaging/dist-test.sh

node-deps: ## install the npm web-push package the interop tests send with
	@command -v npm >/dev/null || { echo "npm not found: apt-get install nodejs npm"; exit 1; }
	cd tools/webpush-node && npm ci --no-audit --no-fund --loglevel=error

pywebpush: ## a venv in tools/examples/pywebpush/.venv with pywebpush and what it needs, pinned (requirements.txt): the README's pywebpush example runs with its python
	@command -v python3 >/dev/null || { echo "python3 not found: apt-get install python3 python3-venv"; exit 1; }
	@test -x tools/examples/pywebpush/.venv/bin/python -a tools/examples/pywebpush/.venv/.installed -nt tools/examples/pywebpush/requirements.txt || \
	  { python3 -m venv tools/examples/pywebpush/.venv && \
	    tools/examples/pywebpush/.venv/bin/pip install --quiet --disable-pip-version-check --no-deps -r tools/examples/pywebpush/requirements.txt && \
	    touch tools/examples/pywebpush/.venv/.installed; }

py-deps: ## install the pinned schemathesis into a venv (prints SCHEMATHESIS=... for go test ./docs)
	@command -v python3 >/dev/null || { echo "python3 not found: apt-get install python3 python3-venv"; exit 1; }
	@test -x $(SCHEMATHESIS_VENV)/bin/st || { python3 -m venv $(SCHEMATHESIS_VENV) && \
	  $(SCHEMATHESIS_VENV)/bin/pip install --quiet --disable-pip-version-check schemathesis==$(SCHEMATHESIS_VERSION); } >&2
	@echo SCHEMATHESIS=$(SCHEMATHESIS_VENV)/bin/st

schemathesis: ## docs/openapi.yaml against a live stack, SCHEMATHESIS_EXAMPLES (400) cases an operation, a new SCHEMATHESIS_SEED each time (make test runs 40, one seed; ~11 min on 2 cores)
	@st=$$($(MAKE) --no-print-directory py-deps) && export "$$st" && \
	  SCHEMATHESIS_EXAMPLES=$(SCHEMATHESIS_EXAMPLES) SCHEMATHESIS_SEED=$(SCHEMATHESIS_SEED) $(GO) test -count=1 -v -timeout 6h -run '^TestSchemathesis$$' ./docs/

test: ## everything CI runs: lint, race tests on both storage backends against a real Cassandra, then make e2e
	bash tools/test.sh

test-stress: ## make test with a CPU hog on every core, and the engine, API tier and stack packages 3 times in all
	bash tools/test.sh stress

test-unit: ## tests that need no CQL server (the Scylla backend's tests skip, saying why)
	$(GO) test -race -count=1 ./...

e2e: ## headless Firefox through the single-node server, over ws:// and over wss:// via nginx (installs firefox-esr, nginx, certutil as root if missing)
	@bash tools/e2e/firefox/install.sh firefox-esr:firefox-esr nginx:nginx certutil:libnss3-tools
	@test -d tools/webpush-node/node_modules || ! command -v npm >/dev/null || $(MAKE) --no-print-directory node-deps
	AUTOPUSH_E2E_FIREFOX=1 $(GO) test -count=1 -v -timeout 12m -run '^TestFirefox(TLS)?$$' ./tools/e2e/firefox/

bench: ## storage benchmarks (starts Cassandra when CQL_HOSTS is unset)
	bash tools/test.sh bench $(BENCHTIME)

sender-cluster: ## two, then three sender nodes on one Cassandra keyspace sharing one account's rate: 30,000 pushes each, sent once, the most in any second (~8 min; starts Cassandra when CQL_HOSTS is unset)
	bash tools/test.sh sender-cluster

.PHONY: sender-cluster-faults
sender-cluster-faults: ## two autoendpoint sender nodes on a 3-node Cassandra cluster (RF 3) of its own: one SIGKILLed holding leases and taken over, a CQL node killed and restarted meanwhile; 20,000 pushes, each accepted once by the fake provider (~7 min; make test's cluster step: 3,000)
	bash tools/test.sh sender-cluster-faults

sender-stop: ## SIGTERM a sender node with its queue full, 5 rounds of 5,000 pushes per backend (on Cassandra beside a second node), and SIGKILL one for the takeover; exit time, pushes left, sent once, pace, counted at the provider (~25 min; starts Cassandra when CQL_HOSTS is unset)
	bash tools/test.sh sender-stop

burst: ## a connected user agent acking at 50/s gets bursts of 2,000 pushes through the push API, 10 rounds per backend: no reset (msg-limit counts only a backlog), each push delivered once (~16 min; starts Cassandra when CQL_HOSTS is unset)
	bash tools/test.sh burst

sender-crash: ## SIGKILL autoendpoint mid-stream and restart, 3 rounds of 6,000 pushes per backend and policy, counted at the provider (~10 min; starts Cassandra when CQL_HOSTS is unset)
	bash tools/test.sh sender-crash

drain-loop: ## SIGTERM the single-node server while pushes and acks flow, restart, reconnect: 20 rounds on each backend, nothing answered 201 lost, nothing acked delivered again (~3 min; starts Cassandra when CQL_HOSTS is unset)
	bash tools/test.sh drain-loop

sender-bench: ## load test the outbound sender: POST /push at 500/s for 80 s against a fake Swrve with Swrve's measured latency (p50 983 ms, p99 5,956 ms); report in loadtest/out (~4 min)
	$(GO) run ./loadtest/cmd/loadtest sender $(SENDER_FLAGS)

SENDER_FLOOD_FLAGS ?= -clients 3 -client-rate 5 -push-rate 500 -duration 40s -measure 40s
sender-flood: ## the flood run, twice: three push API clients, the first posting 500/s (twice the pace), the others 5/s each; then the same with the flooder's rate quota at 200/s (429s); each client's 429s, SENT and POST-to-provider latency (docs/benchmarks.md; ~4 min)
	$(GO) run ./loadtest/cmd/loadtest sender $(SENDER_FLOOD_FLAGS)
	$(GO) run ./loadtest/cmd/loadtest sender $(SENDER_FLOOD_FLAGS) -flood-quota 200

bridge-bench: ## load test the mobile bridges: WebPush POSTs to 1,000 FCM phones at 500/s for 80 s, FCM paced at 250/s under a 300/s limit against a fake FCM (~3 min)
	$(GO) run ./loadtest/cmd/loadtest sender -provider fcm -provider-latency 80ms -average-latency 500ms $(BRIDGE_FLAGS)

cluster: ## a replicated cluster on this machine, no Docker: 3 Cassandra nodes (127.0.0.1-3, replication 3), 2 engines, 2 endpoints behind nginx, in the background; prints where everything listens (CLUSTER_DIR, default loadtest/out/cluster; ~1 min)
	bash tools/cluster.sh up

cluster-down: ## stop what make cluster started, by PID
	bash tools/cluster.sh down

FAULTS_FLAGS ?= -uas 2000 -push-rate 200
faults: ## the fault scenario in full: 3 Cassandra nodes, 2 engines, 2 endpoints behind nginx; while pushes flow, kill a replica, kill an engine, kill an endpoint, roll the engines, 30 s storage outage; lost, duplicated, refusals and recovery per fault (docs/capacity.md; ~12 min)
	$(GO) run ./loadtest/cmd/loadtest faults $(FAULTS_FLAGS)

capacity: ## load test this machine (200k idle user agents, latency ladder, exactly-once runs); writes docs/capacity.md
	bash loadtest/capacity.sh $(CAPACITY_FLAGS)

pushpath: ## the push path and the hello at this machine's limit, 3 runs each, medians: single-node pushes/s at p99 <= 50 ms (JWT reused; once signed afresh), hellos/s, RSS per idle connection, CPU at rest (19,000 idle) and per push at 1,000-12,000/s with the floor of a bare Go transport at the same rates; PUSHPATH_CQL=1 adds the split tiers on one Cassandra node (docs/benchmarks.md; ~25 min, ~35 with CQL; on a quiet machine)
	bash loadtest/pushpath.sh

MILLION_FLAGS ?= -uas 1000000 -engines 56 -workers 56 -connect-rate 4000 -steps 5 -settle 15s -hold 5m -ping-interval 4m -engine-ping-interval 2m -out loadtest/out/million
million: ## 1,000,000 idle user agents on 56 engines (embedded store, one each) from 56 workers, held 5 min with pings both ways: connect rate, drops, user-space and kernel memory per connection (checks the kernel settings first; docs/capacity.md; ~17 min, ~13 GiB)
	$(GO) run ./loadtest/cmd/loadtest hold -cql-hosts "" $(MILLION_FLAGS)

MAXHOLD_FLAGS ?= -uas 1500000 -engines 84 -workers 84 -connect-rate 4000 -steps 5 -settle 15s -hold 10m -ping-interval 8m -engine-ping-interval 5m -out loadtest/out/maxhold
maxhold: ## 1,500,000 idle user agents on 84 engines from 84 workers, held 10 min with pings both ways (the engines' default 5 min, a {} every 8 min; docs/capacity.md: not held on 2 cores; ~35 min, ~17 GiB: needs fs.file-max and nf_conntrack_max raised, the load tester names them)
	$(GO) run ./loadtest/cmd/loadtest hold -cql-hosts "" $(MAXHOLD_FLAGS)

STALL_FLAGS ?= -uas 2000 -rates 500 -stalls 5000 -stage-time 15s -p99-limit 0 -min-stages 1
stall: ## 5,000 push API connections, 1,000 stalled each way (header, header+0, body, chunk, 1 byte/s), while 500 pushes/s flow (docs/capacity.md); CQL_HOSTS: autoendpoint, else the single-node server
	$(GO) run ./loadtest/cmd/loadtest notify $(STALL_FLAGS)

FANOUT_FLAGS ?= -uas 10000 -push-rate 200
fanout: ## broadcast fan-out to 10,000 user agents while 200 pushes/s flow (docs/benchmarks.md); CQL_HOSTS: autoconnect and autoendpoint, else the single-node server
	$(GO) run ./loadtest/cmd/loadtest broadcast $(FANOUT_FLAGS)

fuzz: ## run every fuzz target for FUZZTIME each
	@set -e; for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "fuzz $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f\$$" -fuzztime $(FUZZTIME) $$pkg; \
	  done; done

lint: ## gofmt, go vet and a pinned staticcheck
	@test -z "$$(gofmt -l .)" || { echo "gofmt needed:"; gofmt -l .; exit 1; }
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...
