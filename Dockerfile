# syntax=docker/dockerfile:1
#
# The contextrouter image: one static binary on distroless/static, run as the
# unprivileged user 65532. The same image runs the operator (`operator`), the
# router Deployments and the injected sidecars (`serve`).
#
#   make docker-build IMG=registry.example.com/contextrouter:v0.1.0
#
# hack/imagebuilder builds an equivalent image without a Docker engine (same
# user, entrypoint, working directory and files); keep the two in step.

ARG GO_VERSION=1.26

# Build on the build machine's platform and cross-compile: no emulation is
# needed for multi-platform images because cgo is off.
FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS build
ARG TARGETOS=linux
ARG TARGETARCH=amd64
ARG VERSION=dev
WORKDIR /src
# Modules first, so a source change does not download them again.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY api/ api/
COPY cmd/ cmd/
COPY internal/ internal/
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} \
    go build -trimpath \
      -ldflags "-s -w -X github.com/contextrouter/contextrouter/internal/cli.Version=${VERSION}" \
      -o /out/contextrouter ./cmd/contextrouter

# distroless/static has CA certificates, /etc/passwd with nonroot (65532),
# /tmp and tzdata, and no shell or package manager.
FROM gcr.io/distroless/static:nonroot
ARG VERSION=dev
LABEL org.opencontainers.image.title="contextrouter" \
      org.opencontainers.image.description="Kubernetes-native context router for AI agents" \
      org.opencontainers.image.source="https://github.com/contextrouter/contextrouter" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}"
COPY --from=build /out/contextrouter /contextrouter
WORKDIR /home/nonroot
# Numeric, so that runAsNonRoot can verify it without reading /etc/passwd.
USER 65532:65532
ENTRYPOINT ["/contextrouter"]
