# The two commands a newcomer needs: `make run` and `make test`.
SHELL := /bin/bash
GO ?= go
BIN := bin
STATICCHECK_VERSION := v0.8.2
GOBIN_DIR := $(shell $(GO) env GOPATH)/bin
export GOFLAGS := -buildvcs=false
export GOTOOLCHAIN := local

.PHONY: all build run test vet lint fmt-check fuzz bench clean deps node-deps ratelimit-deps openssl-deps h2spec-deps

all: build

deps:
	$(GO) mod download

# debian-install TARGET,COMMAND,PACKAGE: installs Debian's PACKAGE when
# COMMAND is missing, as root or through sudo (failing with a clear message
# when neither is possible).
define debian-install
if ! command -v $(2) >/dev/null; then \
  echo "$(1): installing $(3)"; \
  sudo=; \
  if [ "$$(id -u)" != 0 ]; then \
    command -v sudo >/dev/null || { echo "$(1): $(2) is missing and installing it needs root or sudo: install Debian's $(3)" >&2; exit 1; }; \
    sudo=sudo; \
  fi; \
  $$sudo apt-get update && $$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $(3); \
fi
endef

# The npm packages the Node.js MCP tests run (backend/mcp/mcptest/nodemcp),
# pinned by testdata/node/package-lock.json. `npm ci` runs only when
# node_modules is missing or was installed from another lock file (the copy
# in node_modules/.nodemcp-lock.json says which); node and npm come from
# Debian when missing.
NODE_DIR := testdata/node
NODE_STAMP := $(NODE_DIR)/node_modules/.nodemcp-lock.json
node-deps:
	@if ! command -v node >/dev/null || ! command -v npm >/dev/null; then \
	  echo "node-deps: installing nodejs and npm"; \
	  sudo=; [ "$$(id -u)" = 0 ] || sudo=sudo; \
	  $$sudo apt-get update && $$sudo apt-get install -y nodejs npm; \
	fi
	@if ! cmp -s $(NODE_DIR)/package-lock.json $(NODE_STAMP); then \
	  echo "node-deps: npm ci in $(NODE_DIR)"; \
	  rm -f $(NODE_STAMP); \
	  (cd $(NODE_DIR) && npm ci --no-audit --no-fund --ignore-scripts) && \
	  cp $(NODE_DIR)/package-lock.json $(NODE_STAMP); \
	fi

# What the cross-replica remoteRateLimit test (cmd/gateway) runs: Debian's
# redis-server, installed when missing (the test starts its own on a loopback
# port; it never uses a system service), and Envoy's rate limit service,
# built from the Go module proxy at the version that
# policy/remoteratelimit/envoyrls/version.txt pins, into bin/ (kept there:
# built again only for another version). It is built apart from go.mod, which
# it would fill with its dependencies.
RLS_VERSION := $(shell cat policy/remoteratelimit/envoyrls/version.txt)
RLS_BIN := $(BIN)/envoy-ratelimit/$(RLS_VERSION)/service_cmd
ratelimit-deps: $(RLS_BIN)
	@$(call debian-install,ratelimit-deps,redis-server,redis-server)
$(RLS_BIN):
	@echo "ratelimit-deps: building github.com/envoyproxy/ratelimit@$(RLS_VERSION)"
	GOBIN=$(abspath $(dir $(RLS_BIN))) $(GO) install github.com/envoyproxy/ratelimit/src/service_cmd@$(RLS_VERSION)

# OpenSSL's command line (Debian's openssl package): a test sends a TLS 1.3
# KeyUpdate with its s_client, which Go's TLS client cannot send.
openssl-deps:
	@$(call debian-install,openssl-deps,openssl,openssl)

# h2spec, the HTTP/2 conformance suite TestH2Spec runs against the gateway,
# built into bin/ from the module testdata/h2spec, which pins it and what it
# builds with (its tag predates modules). The test is told where it is, so
# that without it the test fails rather than skips.
export H2SPEC := $(abspath $(BIN)/h2spec/h2spec)
h2spec-deps: $(H2SPEC)
$(H2SPEC): testdata/h2spec/go.mod testdata/h2spec/go.sum
	@echo "h2spec-deps: building h2spec"
	cd testdata/h2spec && $(GO) build -o $(H2SPEC) github.com/summerwind/h2spec/cmd/h2spec

build: deps
	$(GO) build -o $(BIN)/gateway ./cmd/gateway
	$(GO) build -o $(BIN)/demo-upstream ./cmd/demo-upstream

# The gateway on its embedded quickstart config (examples/quickstart.yaml) in
# front of a demo upstream; Ctrl-C stops both.
run: build
	@$(BIN)/demo-upstream -addr 127.0.0.1:3001 & up=$$!; \
	trap "kill $$up 2>/dev/null" EXIT INT TERM; \
	echo; echo "Try:"; \
	echo "  curl -i localhost:3000/anything       # proxied to the demo upstream"; \
	echo "  curl -i localhost:3000/hello          # answered by the gateway"; \
	echo "  curl -N localhost:3000/events         # server-sent events, streamed"; \
	echo "  http://localhost:15000/ui/            # admin UI, in a browser; metrics at :15020/metrics"; \
	echo; \
	$(BIN)/gateway

# The race detector's instrumentation allocates, so the tests that hold hot
# paths at zero allocations skip under -race; the second run checks them.
test: deps node-deps ratelimit-deps openssl-deps h2spec-deps fmt-check vet lint
	$(GO) test -race -count=1 -timeout 15m ./...
	$(GO) test -count=1 -run 'Alloc' ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

lint:
	@test -x $(GOBIN_DIR)/staticcheck || $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	$(GOBIN_DIR)/staticcheck ./...

# Short coverage-guided runs of every fuzz target (FUZZTIME per target).
FUZZTIME ?= 20s
fuzz:
	@for pkg in $$($(GO) list ./...); do \
	  for t in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
	    echo "== $$pkg $$t"; $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	  done; \
	done

# The gateway beside nginx (default buffering, and proxy_buffering off),
# HAProxy and a bare fasthttp proxy, access logs on for every target
# (BENCH_ACCESS_LOG=off make bench for none), plus the LLM case and the
# connection layer (TCP, TLS passthrough, HTTPS, h2; BENCH_CASES='tcp tls
# https h2' make bench for those alone); writes bench/RESULTS.md. Knobs:
# bench/README.md.
bench:
	bash bench/run.sh

clean:
	rm -rf $(BIN) bench/.bin
