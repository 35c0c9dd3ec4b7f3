# contextrouter — build, test and tooling. Every tool is installed into bin/
# from the Go module proxy at a pinned version; nothing else is downloaded.

SHELL := /usr/bin/env bash -o pipefail
GO ?= go
BIN := $(CURDIR)/bin
export GOBIN := $(BIN)

CONTROLLER_TOOLS_VERSION ?= v0.23.0
BENCHSTAT_VERSION ?= v0.0.0-20260908200009-22c9c6c9d4da
CONTROLLER_GEN := $(BIN)/controller-gen-$(CONTROLLER_TOOLS_VERSION)

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X github.com/contextrouter/contextrouter/internal/cli.Version=$(VERSION)

DEMO_ARGS ?= -f examples/quickstart -a hr-assistant "How many vacation days do I get, and can I carry them over?"

.PHONY: all build test demo bench lint generate verify-generate tools clean help

all: build

help: ## Show the targets.
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

build: ## Build bin/contextrouter.
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/contextrouter ./cmd/contextrouter

demo: build ## Ask the quickstart knowledge base a question (no cluster needed).
	$(BIN)/contextrouter query $(DEMO_ARGS)

test: ## Run every test.
	$(GO) test -count=1 -timeout 20m ./...

bench: ## Run the benchmarks (see docs/benchmarks.md).
	$(GO) test -run '^$$' -bench . -benchmem -count $${COUNT:-1} ./internal/... | tee $(BIN)/bench.txt

lint: ## gofmt check and go vet.
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './bin/*')); \
	  if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

generate: $(CONTROLLER_GEN) ## Generate deepcopy code.
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./api/...

verify-generate: generate ## Fail if generated files are stale.
	@git diff --exit-code -- api/ || { echo "generated files are stale: run 'make generate' and commit"; exit 1; }

tools: $(CONTROLLER_GEN) ## Install the pinned tools into bin/.

$(CONTROLLER_GEN):
	@mkdir -p $(BIN)
	$(GO) install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_TOOLS_VERSION)
	mv $(BIN)/controller-gen $@

$(BIN)/benchstat:
	$(GO) install golang.org/x/perf/cmd/benchstat@$(BENCHSTAT_VERSION)

clean: ## Remove build outputs.
	rm -rf $(BIN)
