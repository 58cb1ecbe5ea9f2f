# The interface CI and people share. `make help` lists the targets.
SHELL := /bin/bash
GO ?= go
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
FUZZTIME ?= 20s
BENCHTIME ?= 1s

.PHONY: help run build test test-unit bench fuzz lint node-deps

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

run: ## the whole service in one process over the embedded store (ws :8080, node API :8081, push API :8082)
	$(GO) run ./tools/cmd/devserver -data-dir ./data

build: ## compile every package and binary
	$(GO) build ./...

node-deps: ## install the npm web-push package the interop tests send with
	@command -v npm >/dev/null || { echo "npm not found: apt-get install nodejs npm"; exit 1; }
	cd tools/webpush-node && npm ci --no-audit --no-fund --loglevel=error

test: ## everything CI runs: lint, race tests on both storage backends against a real Cassandra
	bash tools/test.sh

test-unit: ## tests that need no CQL server (the Scylla backend's tests skip, saying why)
	$(GO) test -race -count=1 ./...

bench: ## storage benchmarks (starts Cassandra when CQL_HOSTS is unset)
	bash tools/test.sh bench $(BENCHTIME)

fuzz: ## run every fuzz target for FUZZTIME each
	@set -e; for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "fuzz $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f\$$" -fuzztime $(FUZZTIME) $$pkg; \
	  done; done

lint: ## gofmt, go vet and a pinned staticcheck
	@test -z "$$(gofmt -l .)" || { echo "gofmt needed:"; gofmt -l .; exit 1; }
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...
