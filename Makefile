# contextrouter — build, test and tooling. Every tool is installed into bin/
# from the Go module proxy at a pinned version; nothing else is downloaded.

SHELL := /usr/bin/env bash -o pipefail
GO ?= go
BIN := $(CURDIR)/bin
export GOBIN := $(BIN)

CONTROLLER_TOOLS_VERSION ?= v0.23.0
BENCHSTAT_VERSION ?= v0.0.0-20260908200009-22c9c6c9d4da
CONTROLLER_GEN := $(BIN)/controller-gen-$(CONTROLLER_TOOLS_VERSION)
# v5.8.3 and later need Go 1.27.
KUSTOMIZE_VERSION ?= v5.8.2
KUSTOMIZE := $(BIN)/kustomize-$(KUSTOMIZE_VERSION)
# Helm 4 (chart apiVersion v2, as Helm 3 reads it too); bin/helm links to it.
HELM_VERSION ?= v4.3.1
HELM := $(BIN)/helm-$(HELM_VERSION)
CHART := charts/contextrouter
KUBECTL ?= kubectl
# Operator image that deploy and build-installer write into config/manager.
IMG ?= contextrouter:dev

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X github.com/contextrouter/contextrouter/internal/cli.Version=$(VERSION)

DEMO_ARGS ?= -f examples/quickstart -a hr-assistant "How many vacation days do I get, and can I carry them over?"

# Test control plane: Kubernetes built from Go modules by the separate module
# hack/controlplane (no release downloads; envtest finds the binaries through
# KUBEBUILDER_ASSETS). K8S_VERSION must match k8s.io/kubernetes in its go.mod;
# the build checks that. The build date is the release's commit time as the
# module proxy reports it, fixed so that rebuilds are reproducible.
K8S_VERSION := v1.36.3
K8S_BUILD_DATE := 2026-07-22T18:07:38Z
K8S_BIN := $(BIN)/k8s/$(K8S_VERSION)
K8S_MOD := hack/controlplane
CONTROLPLANE_BINARIES := kube-apiserver etcd kubectl kube-controller-manager
NODE_BINARIES := kube-scheduler kubelet kube-proxy
K8S_MAJOR := $(word 1,$(subst ., ,$(K8S_VERSION:v%=%)))
K8S_MINOR := $(word 2,$(subst ., ,$(K8S_VERSION:v%=%)))
# Both version packages are stamped: servers report component-base's, kubectl's
# client half reports client-go's. The module proxy does not know the release
# commit, so gitCommit is left empty rather than a placeholder.
K8S_LDFLAGS := -s -w $(foreach p,k8s.io/component-base/version k8s.io/client-go/pkg/version,\
	-X $(p).gitVersion=$(K8S_VERSION) -X $(p).gitMajor=$(K8S_MAJOR) -X $(p).gitMinor=$(K8S_MINOR) \
	-X $(p).gitCommit= -X $(p).gitTreeState=clean -X $(p).buildDate=$(K8S_BUILD_DATE))

.PHONY: all build test fuzz demo bench lint generate verify-generate tools clean help
.PHONY: manifests samples verify-manifests install uninstall deploy undeploy build-installer

all: build

help: ## Show the targets.
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

build: ## Build bin/contextrouter.
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/contextrouter ./cmd/contextrouter

demo: build ## Ask the quickstart knowledge base a question (no cluster needed).
	$(BIN)/contextrouter query $(DEMO_ARGS)

test: export KUBEBUILDER_ASSETS := $(K8S_BIN)
test: controlplane redis-server helm helm-lint helm-template test-imagebuilder test-argocd ## Run every test (envtest uses the control plane in bin/k8s), then fuzz each target for FUZZTIME.
	$(GO) test -count=1 -timeout 20m ./...
	@$(MAKE) --no-print-directory fuzz

# Fuzz targets as package:Name. go test -fuzz takes one target per run, so
# they run one after another, FUZZTIME each; `go test ./...` replays their
# seed corpora (testdata/fuzz/<Name>/ and the f.Add seeds) as ordinary tests.
# A failing input is written to testdata/fuzz/<Name>/: commit it with the fix.
# New interesting inputs are minimized for at most FUZZMINIMIZETIME, so a
# short run spends its time exploring. The instrumented build is separate
# from the test build: about 175 CPU-seconds from an empty cache. Keep
# FUZZTIME under go test's default -timeout of 10m.
# The default is a count of inputs, not a duration: on Go 1.26 a duration
# can end a run that found nothing with "context deadline exceeded" (a race
# in the fuzzing coordinator, go.dev/issue/75804, fixed in Go 1.27), which
# would fail make test at random. 3000 inputs take 1-8 s per target here.
FUZZTIME ?= 3000x
FUZZMINIMIZETIME ?= 500x
FUZZ_TARGETS := \
	./internal/manifest:FuzzParse \
	./internal/engine:FuzzCondition \
	./internal/sources:FuzzSplitDocument \
	./internal/sources:FuzzHTTPAPIResponse \
	./internal/sources:FuzzParseCatalog \
	./internal/session:FuzzSessionFile \
	./internal/session:FuzzJSONSummary \
	./internal/session:FuzzJSONPath \
	./internal/secrets:FuzzMask \
	./internal/session:FuzzDrillText \
	./internal/session/redisstore:FuzzItemRecord \
	./internal/convert:FuzzTheaios \
	./internal/convert:FuzzCondition \
	./internal/server/fuzz:FuzzQuery \
	./internal/budget:FuzzTruncate \
	./internal/budget:FuzzBPE \
	./internal/budget:FuzzPieceCounter

fuzz: ## Run every fuzz target for FUZZTIME (default 3000 inputs) each; longer: make fuzz FUZZTIME=1000000x.
	@set -e; for t in $(FUZZ_TARGETS); do \
	  pkg=$${t%%:*}; name=$${t#*:}; echo "== fuzz $$name ($$pkg) for $(FUZZTIME)"; \
	  $(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZETIME) $$pkg; \
	done

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

# The RBAC role and the webhook configuration come from +kubebuilder:rbac and
# +kubebuilder:webhook markers anywhere under internal/; config/default's
# namePrefix turns the role "operator" into contextrouter-operator. The CRD
# folder is emptied first so a removed kind loses its CRD.
manifests: $(CONTROLLER_GEN) ## Generate the CRDs, the operator's RBAC role and the webhook configuration into config/.
	rm -f config/crd/bases/*.yaml
	$(CONTROLLER_GEN) crd:generateEmbeddedObjectMeta=false rbac:roleName=operator webhook \
	  paths=./api/... paths=./internal/... \
	  output:crd:artifacts:config=config/crd/bases \
	  output:rbac:artifacts:config=config/rbac \
	  output:webhook:artifacts:config=config/webhook

samples: ## Generate the document ConfigMaps of config/samples from examples/quickstart.
	$(GO) run ./hack/samples -quickstart examples/quickstart -sources config/samples/sources.yaml -out config/samples

verify-manifests: manifests samples chart-crds $(KUSTOMIZE) ## Fail if config/ or the chart's CRDs are stale or config/default does not build.
	@git diff --exit-code -- config/ $(CHART)/crds/ || { echo "generated manifests are stale: run 'make manifests samples chart-crds' and commit"; exit 1; }
	@new=$$(git ls-files --others --exclude-standard -- config/ $(CHART)/crds/); \
	  if [ -n "$$new" ]; then echo "generated manifests are not committed:"; echo "$$new"; exit 1; fi
	$(KUSTOMIZE) build config/default >/dev/null

install: manifests $(KUSTOMIZE) ## Install the CRDs into the cluster of the current kubeconfig.
	$(KUSTOMIZE) build config/crd | $(KUBECTL) apply --server-side -f -

uninstall: $(KUSTOMIZE) ## Remove the CRDs (and with them every object of the four kinds).
	$(KUSTOMIZE) build config/crd | $(KUBECTL) delete --ignore-not-found -f -

# deploy and build-installer set the image in config/manager/kustomization.yaml
# (the kubebuilder convention); with the default IMG it stays unchanged.
deploy: manifests $(KUSTOMIZE) ## Deploy the operator (image IMG) into the cluster of the current kubeconfig.
	cd config/manager && $(KUSTOMIZE) edit set image contextrouter=$(IMG)
	$(KUSTOMIZE) build config/default | $(KUBECTL) apply --server-side -f -

undeploy: $(KUSTOMIZE) ## Remove the operator, its CRDs and every object of the four kinds.
	$(KUSTOMIZE) build config/default | $(KUBECTL) delete --ignore-not-found -f -

build-installer: manifests $(KUSTOMIZE) ## Write dist/install.yaml: CRDs, RBAC, webhook and the operator (image IMG).
	@mkdir -p dist
	cd config/manager && $(KUSTOMIZE) edit set image contextrouter=$(IMG)
	$(KUSTOMIZE) build config/default > dist/install.yaml

tools: $(CONTROLLER_GEN) $(KUSTOMIZE) helm ## Install the pinned tools into bin/.

$(CONTROLLER_GEN):
	@mkdir -p $(BIN)
	$(GO) install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_TOOLS_VERSION)
	mv $(BIN)/controller-gen $@

$(KUSTOMIZE):
	@mkdir -p $(BIN)
	$(GO) install sigs.k8s.io/kustomize/kustomize/v5@$(KUSTOMIZE_VERSION)
	mv $(BIN)/kustomize $@

$(BIN)/benchstat:
	$(GO) install golang.org/x/perf/cmd/benchstat@$(BENCHSTAT_VERSION)

# k8s-build builds the binaries $(2) from $(K8S_MOD) in ONE go build: they
# share most packages, so a single invocation compiles them once and links in
# parallel. It does nothing when every binary exists and the stamp
# $(K8S_BIN)/.$(1).stamp matches the hash of go.mod, go.sum, the mains, the
# module's internal packages, the build flags and the Go version. $(3) is
# extra environment for go build.
define k8s-build
	@set -e; mkdir -p $(K8S_BIN); \
	grep -Eq '^[[:space:]]*k8s.io/kubernetes $(K8S_VERSION)$$' $(K8S_MOD)/go.mod || \
	  { echo "$(K8S_MOD)/go.mod does not require k8s.io/kubernetes $(K8S_VERSION) (K8S_VERSION)" >&2; exit 1; }; \
	sum=$$({ printf '%s\n' '$(3)' '$(K8S_LDFLAGS)' '$(2)'; $(GO) version; \
	  cd $(K8S_MOD) && cat go.mod go.sum && find $(foreach b,$(2),cmd/$(b)) internal -name '*.go' | LC_ALL=C sort | xargs cat; } \
	  | sha256sum | cut -d' ' -f1); \
	present=1; for b in $(2); do [ -x "$(K8S_BIN)/$$b" ] || present=0; done; \
	if [ $$present = 1 ] && [ "$$(cat $(K8S_BIN)/.$(1).stamp 2>/dev/null)" = "$$sum" ]; then \
	  echo "$(1): up to date in $(K8S_BIN)"; exit 0; fi; \
	rm -f $(K8S_BIN)/.$(1).stamp; \
	echo "$(1): building $(2) ($(K8S_VERSION)) into $(K8S_BIN)"; \
	$(3) GOWORK=off $(GO) -C $(K8S_MOD) build -buildvcs=false -trimpath -ldflags '$(K8S_LDFLAGS)' \
	  -o $(K8S_BIN)/ $(foreach b,$(2),./cmd/$(b)); \
	echo "$$sum" > $(K8S_BIN)/.$(1).stamp
endef

.PHONY: controlplane node-binaries

controlplane: ## Build kube-apiserver, etcd, kubectl and kube-controller-manager (garbage collection) for envtest into bin/k8s/ (cached).
	$(call k8s-build,controlplane,$(CONTROLPLANE_BINARIES),CGO_ENABLED=0)

# cgo stays at the toolchain default: upstream links the kubelet with cgo.
node-binaries: ## Build kube-scheduler, kubelet, kube-proxy into bin/k8s/ (cached).
	$(call k8s-build,node-binaries,$(NODE_BINARIES),)

clean: ## Remove build outputs.
	rm -rf $(BIN)

# --- Image, Helm chart, Argo CD health checks ---------------------------------

.PHONY: docker-build images helm helm-lint helm-template chart-crds test-imagebuilder test-argocd

CONTAINER_TOOL ?= docker
# Image tarballs for clusters without a registry (ctr -n k8s.io images import).
IMAGES := $(BIN)/images
IMAGE_REGISTRY ?= localhost
IMAGE_TAG ?= dev
# The end-to-end test agent, packed by `make images` once it exists.
E2E_AGENT := ./test/e2e/agent

docker-build: ## Build the image IMG from the Dockerfile (needs a Docker engine).
	$(CONTAINER_TOOL) build --build-arg VERSION=$(VERSION) -t $(IMG) .

# The separate module hack/imagebuilder packs static binaries into images
# like the Dockerfile's final stage, without Docker.
images: build ## Write contextrouter, pause (and e2e agent) image tarballs to bin/images.
	@mkdir -p $(IMAGES)
	GOWORK=off $(GO) -C hack/imagebuilder build -trimpath -o $(BIN)/imagebuilder .
	CGO_ENABLED=0 GOWORK=off $(GO) -C hack/imagebuilder build -trimpath -ldflags '-s -w' -o $(BIN)/pause ./pause
	$(BIN)/imagebuilder -binary $(BIN)/contextrouter -tag $(IMAGE_REGISTRY)/contextrouter:$(IMAGE_TAG) \
	  -out $(IMAGES)/contextrouter.tar -label org.opencontainers.image.version=$(VERSION)
	$(BIN)/imagebuilder -pause -binary $(BIN)/pause -tag $(IMAGE_REGISTRY)/pause:$(IMAGE_TAG) -out $(IMAGES)/pause.tar
	@if [ -d $(E2E_AGENT) ]; then set -x; \
	  CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w' -o $(BIN)/e2e-agent $(E2E_AGENT) && \
	  $(BIN)/imagebuilder -binary $(BIN)/e2e-agent -entrypoint /e2e-agent \
	    -tag $(IMAGE_REGISTRY)/e2e-agent:$(IMAGE_TAG) -out $(IMAGES)/agent.tar; fi

helm: $(HELM) ## Install helm into bin/ (bin/helm is the pinned version).
	@ln -sf $(notdir $(HELM)) $(BIN)/helm

$(HELM):
	@mkdir -p $(BIN)
	$(GO) install -ldflags '-s -w -X helm.sh/helm/v4/internal/version.version=$(HELM_VERSION)' helm.sh/helm/v4/cmd/helm@$(HELM_VERSION)
	mv $(BIN)/helm $@

helm-lint: helm ## Lint the chart with its default values and with cert-manager.
	$(BIN)/helm lint --strict $(CHART)
	$(BIN)/helm lint --strict $(CHART) --set certManager.enabled=true,injection.enabled=false

# Rendered into bin/chart for inspection (test/packaging renders the chart
# itself and has an API server check every object).
helm-template: helm ## Render the chart (default values; cert-manager without injection) into bin/chart.
	@mkdir -p $(BIN)/chart
	$(BIN)/helm template contextrouter $(CHART) -n contextrouter-system > $(BIN)/chart/default.yaml
	$(BIN)/helm template contextrouter $(CHART) -n contextrouter-system \
	  --set certManager.enabled=true,injection.enabled=false > $(BIN)/chart/cert-manager.yaml

# Helm installs crds/ as is; config/crd/bases is the source.
chart-crds: manifests ## Copy the generated CRDs into the chart.
	rm -f $(CHART)/crds/*.yaml
	cp config/crd/bases/*.yaml $(CHART)/crds/

test-imagebuilder: ## Test hack/imagebuilder (a separate module).
	GOWORK=off $(GO) -C hack/imagebuilder test -count=1 ./...

# The Redis session store's tests run a real redis-server on 127.0.0.1 (they
# skip, saying so, only when it is missing). Installs the Debian package when
# missing and root with apt-get; otherwise says what to do.
.PHONY: redis-server
redis-server: ## Install redis-server (Debian) for the Redis session store tests, when missing.
	@command -v redis-server >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update -q && apt-get install -y -q --no-install-recommends redis-server; \
	  else echo "redis-server is missing: run 'apt-get install redis-server' as root, or the Redis session store tests skip" >&2; fi; }

# A separate module keeps gopher-lua (Argo CD's Lua) out of the operator's
# dependencies.
test-argocd: ## Run the Argo CD health checks of config/argocd against their test cases.
	GOWORK=off $(GO) -C test/argocd test -count=1 ./...

# --- Flux for the GitOps scenario ---------------------------------------------

.PHONY: flux-binaries flux-images

# source-controller and kustomize-controller built from their Go modules by
# the separate module hack/flux (see its README for why this version), and
# their config/ (CRDs, RBAC, Deployments) copied from the same modules, into
# bin/flux/<version>/. Skipped while the stamp matches the hash of go.mod,
# go.sum and the Go version.
FLUX_VERSION := v1.9.0
FLUX_MOD := hack/flux
FLUX_BIN := $(BIN)/flux/$(FLUX_VERSION)
FLUX_CONTROLLERS := source-controller kustomize-controller

flux-binaries: ## Build Flux's source-controller and kustomize-controller and copy their config/ into bin/flux/ (cached).
	@set -e; mkdir -p $(FLUX_BIN); \
	for c in $(FLUX_CONTROLLERS); do \
	  grep -Eq "^[[:space:]]*github.com/fluxcd/$$c $(FLUX_VERSION)( |$$)" $(FLUX_MOD)/go.mod || \
	    { echo "$(FLUX_MOD)/go.mod does not require github.com/fluxcd/$$c $(FLUX_VERSION) (FLUX_VERSION)" >&2; exit 1; }; \
	done; \
	sum=$$({ $(GO) version; cat $(FLUX_MOD)/go.mod $(FLUX_MOD)/go.sum; } | sha256sum | cut -d' ' -f1); \
	present=1; for c in $(FLUX_CONTROLLERS); do [ -x $(FLUX_BIN)/$$c ] && [ -d $(FLUX_BIN)/config/$$c ] || present=0; done; \
	if [ $$present = 1 ] && [ "$$(cat $(FLUX_BIN)/.stamp 2>/dev/null)" = "$$sum" ]; then \
	  echo "flux-binaries: up to date in $(FLUX_BIN)"; exit 0; fi; \
	rm -f $(FLUX_BIN)/.stamp; \
	echo "flux-binaries: building $(FLUX_CONTROLLERS) ($(FLUX_VERSION)) into $(FLUX_BIN)"; \
	CGO_ENABLED=0 GOWORK=off $(GO) -C $(FLUX_MOD) build -buildvcs=false -trimpath -ldflags '-s -w' \
	  -o $(FLUX_BIN)/ $(foreach c,$(FLUX_CONTROLLERS),github.com/fluxcd/$(c)); \
	for c in $(FLUX_CONTROLLERS); do \
	  dir=$$(GOWORK=off $(GO) -C $(FLUX_MOD) list -m -f '{{.Dir}}' github.com/fluxcd/$$c); \
	  rm -rf $(FLUX_BIN)/config/$$c; mkdir -p $(FLUX_BIN)/config/$$c; \
	  cp -R $$dir/config/crd $$dir/config/rbac $$dir/config/manager $(FLUX_BIN)/config/$$c/; \
	  chmod -R u+w $(FLUX_BIN)/config/$$c; \
	done; \
	echo "$$sum" > $(FLUX_BIN)/.stamp

# Packed like ours: the binary as the entrypoint, user 65532, CA certificates.
flux-images: images flux-binaries ## Write the Flux controllers' image tarballs to bin/images.
	@set -e; for c in $(FLUX_CONTROLLERS); do \
	  $(BIN)/imagebuilder -binary $(FLUX_BIN)/$$c -tag $(IMAGE_REGISTRY)/$$c:$(FLUX_VERSION) -out $(IMAGES)/$$c.tar; done

# --- End-to-end test and a local cluster on a real single node ---------------

.PHONY: e2e cluster-up cluster-down cluster-check

# Needs root: it runs containerd (installed with apt-get when missing), the
# kubelet and the rest of bin/k8s on this machine (test/e2e/cluster). One
# cluster per machine: e2e and cluster-up refuse, naming the other, while
# one runs (lock /run/contextrouter-cluster.lock).
e2e: build controlplane node-binaries images flux-images helm ## Run the end-to-end test on a real single-node cluster (root).
	$(GO) test -tags e2e -count=1 -v -timeout 40m ./test/e2e/

# The e2e's cluster, kept running in /var/lib/contextrouter-cluster, with the
# operator installed from the chart (docs/operator.md, "A local cluster").
# cluster-check refuses before the builds, which rewrite the image tarballs
# a running e2e test may be importing.
cluster-up: cluster-check build controlplane node-binaries images helm ## Start a single-node cluster with the operator that keeps running (root); prints its kubeconfig.
	$(GO) run ./hack/cluster up

cluster-check:
	@$(GO) run ./hack/cluster check

cluster-down: ## Stop the cluster of cluster-up and remove everything it left on the host (root).
	$(GO) run ./hack/cluster down
