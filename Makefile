# Thin wrappers over Go commands; each line can be run by hand.
GO        ?= go
BIN       ?= bin
SANDBOX   := $(BIN)/sandbox
# e2e tests start real control planes; the first run on a machine builds them (~15 min on 2 cores).
E2E_TIMEOUT ?= 75m

.PHONY: all build test checks test-unit e2e demo demo-down sandbox sandbox-down sandbox-tools crdgen-tool lint fmt-check vet bench release-check release-snapshot clean crds values-facts fuzz

all: build

build:
	$(GO) build -o $(BIN)/gpuctl ./cmd/gpuctl

$(BIN)/sandbox: FORCE
	$(GO) build -o $(BIN)/sandbox ./e2e/cmd/sandbox

FORCE:

## demo: gpuctl's main job, end to end: a fresh GKE-flavoured sandbox with the real GPU operator
## controller, then `gpuctl install` with no flags. The cluster keeps running for a look around.
demo: build $(BIN)/sandbox
	@$(SANDBOX) down --name demo
	$(SANDBOX) up --name demo --distro gke --gpu-nodes 2 --cpu-nodes 1 --detach
	@eval "$$($(SANDBOX) env --name demo)" && set -x && $(BIN)/gpuctl install && $(BIN)/gpuctl detect
	@echo
	@echo "The demo cluster keeps running. To look around:"
	@echo "  eval \"\$$($(SANDBOX) env --name demo)\"   # then kubectl or $(BIN)/gpuctl against it"
	@echo "  $(BIN)/gpuctl install --dry-run          # the plan: a second install changes nothing"
	@echo "  make demo-down                          # stop it"

demo-down: $(BIN)/sandbox
	$(SANDBOX) down --name demo

## test: everything CI runs, side by side: the sandbox's programs are built and the e2e suites run
## (the critical path: a cold build is most of it, and the suites mostly wait on clusters), while the
## static checks, the unit tests and goreleaser's check run at a lower CPU priority beside them, so
## they fill what the builds leave idle (downloads, single-threaded links) instead of slowing them.
## Each target's output is printed whole when it ends; any failure fails the run.
test:
	$(MAKE) --no-print-directory -j3 --output-sync=target e2e checks

## checks: the static checks, the unit tests and goreleaser's check (at nice 10: see test).
checks:
	nice -n 10 $(MAKE) --no-print-directory --output-sync=target lint test-unit release-check

## test-unit: the fast inner loop; tests that need a real control plane skip themselves in -short mode.
test-unit:
	$(GO) test -short -race ./...

## e2e: tests against real control planes (sandbox self-tests and gpuctl end to end), E2E_PARALLEL
## sandboxes at a time per package.
E2E_PARALLEL ?= 4
e2e: sandbox-tools crdgen-tool
	$(GO) test -race -timeout $(E2E_TIMEOUT) -parallel $(E2E_PARALLEL) ./e2e/...

## crdgen-tool: build controller-gen (for `make crds` and the CRD regeneration test) into the tool cache.
crdgen-tool:
	$(GO) run ./e2e/cmd/crdgen -build-only

## sandbox-tools: build (or find in the cache) the sandbox's programs (the OCI registry and Flux's
## controllers too), with progress.
sandbox-tools: $(BIN)/sandbox
	$(SANDBOX) tools

## sandbox: a gke-flavoured sandbox in the background; prints the KUBECONFIG to use.
sandbox: $(BIN)/sandbox
	$(SANDBOX) up --distro gke --detach

sandbox-down: $(BIN)/sandbox
	$(SANDBOX) down

## crds: regenerate charts/gpu-operator's CRDs from each GPU Operator release's api/ with controller-gen.
crds:
	$(GO) run ./e2e/cmd/crdgen

## values-facts: regenerate internal/bundle/values_facts.json (the values keys NVIDIA's chart of each
## release reads, their defaults and renamed keys) from each GPU Operator release's chart.
values-facts:
	$(GO) run ./e2e/cmd/valuesfacts

lint: vet fmt-check

vet:
	$(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

## fuzz: run each fuzz test for FUZZTIME (their seeds also run in test-unit).
FUZZTIME ?= 20s
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzParseSet$$' -fuzztime $(FUZZTIME) ./internal/release
	$(GO) test -run '^$$' -fuzz '^FuzzMergeValues$$' -fuzztime $(FUZZTIME) ./internal/plan
	$(GO) test -run '^$$' -fuzz '^FuzzAnalyze$$' -fuzztime $(FUZZTIME) ./internal/detect

## bench: gpuctl against the sandbox at BENCH_GPU_NODES (default 500) nodes, side by side with kubectl and
## the API server's own limits; one line per figure with its target (docs/performance.md). Then the Go
## micro-benchmarks.
BENCH_GPU_NODES ?= 500
bench: sandbox-tools
	$(GO) run ./e2e/cmd/bench -gpu-nodes $(BENCH_GPU_NODES)
	$(GO) test -run '^$$' -bench . -benchmem ./...

## goreleaser, pinned in e2e/tools/goreleaser and built once into the tool cache.
GORELEASER_VERSION := v2.15.1
TOOL_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/gpuctl/tools
GORELEASER := $(TOOL_CACHE)/goreleaser-$(GORELEASER_VERSION)

$(GORELEASER):
	cd e2e/tools/goreleaser && $(GO) build -o $(GORELEASER) github.com/goreleaser/goreleaser/v2

## release-check: validate .goreleaser.yaml (builds, archives, the krew manifest) with the pinned goreleaser.
release-check: $(GORELEASER)
	$(GORELEASER) check

## release-snapshot: a full local release build into dist/, published nowhere.
release-snapshot: $(GORELEASER)
	$(GORELEASER) release --snapshot --clean

clean:
	rm -rf $(BIN) dist
