# Thin wrappers over Go commands; each line can be run by hand.
GO        ?= go
BIN       ?= bin
SANDBOX   := $(GO) run ./e2e/cmd/sandbox
# e2e tests start real control planes; the first run on a machine builds them (~15 min on 2 cores).
E2E_TIMEOUT ?= 75m

.PHONY: all build test test-unit e2e demo sandbox sandbox-down sandbox-tools lint fmt-check vet bench release-snapshot clean

all: build

build:
	$(GO) build -o $(BIN)/gpuctl ./cmd/gpuctl

## test: everything CI runs — static checks, unit tests, then the e2e suites on the sandbox.
test: lint test-unit e2e

## test-unit: the fast inner loop; tests that need a real control plane skip themselves in -short mode.
test-unit:
	$(GO) test -short -race ./...

## e2e: tests against real control planes (sandbox self-tests and gpuctl end to end).
e2e: sandbox-tools
	$(GO) test -race -timeout $(E2E_TIMEOUT) ./e2e/...

## sandbox-tools: build (or find in the cache) the sandbox's programs, with progress.
sandbox-tools:
	$(SANDBOX) tools

## sandbox: a gke-flavoured sandbox in the background; prints the KUBECONFIG to use.
sandbox:
	$(SANDBOX) up --distro gke --detach

sandbox-down:
	$(SANDBOX) down

lint: vet fmt-check

vet:
	$(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

release-snapshot:
	$(GO) run github.com/goreleaser/goreleaser/v2@latest release --snapshot --clean

clean:
	rm -rf $(BIN) dist
