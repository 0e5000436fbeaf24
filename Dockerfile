# ordersvc API image.
#
#   docker build -t ordersvc/api .
#
# The base images are build args so a machine without registry access can
# substitute locally built stand-ins (deploy/build-local-images.sh); everyone
# else gets the upstream defaults. GO_IMAGE's Go version must match go.mod's
# `go` line (checked by deploy/deploy_test.go).
ARG GO_IMAGE=golang:1.26.8-bookworm
ARG RUNTIME_IMAGE=gcr.io/distroless/static-debian12:nonroot

FROM ${GO_IMAGE} AS build
# Empty means Go's default; e.g. GOPROXY for a private module proxy.
ARG GOPROXY
ARG GOFLAGS
ENV CGO_ENABLED=0 GOTOOLCHAIN=local
WORKDIR /src
# Layers from the least to the most often changed: the modules (rebuilt only
# when go.mod or go.sum change), then the source (.dockerignore lets in only
# what the build reads, so a test, a doc or a stray file changes nothing).
# Both steps print what they do as they go (-x, -v) and say how long they
# take on a cold 2-core machine.
COPY go.mod go.sum ./
RUN echo "go mod download: the modules of go.sum, under a minute cold" && go mod download -x
COPY . .
# Dropping the build cache in the same step keeps the layer small: without
# BuildKit cache mounts (not every engine has them) it would not be reused anyway.
# ordersvc_build_info's labels: the context has no .git, so the version and
# revision come as build args (docker build --build-arg REVISION=$(git rev-parse HEAD)).
# The demo webhook receiver rides in the same image (the compose stack runs it
# with entrypoint /webhook-receiver): one build for both.
ARG VERSION
ARG REVISION
RUN echo "go build ./cmd/api and the webhook receiver: the longest step, minutes on a cold 2-core machine (docs/first-201.md); each package printed as it compiles" && \
    go build -v -trimpath -ldflags="-s -w -X main.version=${VERSION} -X main.revision=${REVISION}" -o /out/api ./cmd/api && \
    go build -v -trimpath -ldflags='-s -w' -o /out/webhook-receiver ./examples/webhook-receiver && go clean -cache

FROM ${RUNTIME_IMAGE}
COPY --from=build /out/api /api
COPY --from=build /out/webhook-receiver /webhook-receiver
USER 65532:65532
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 CMD ["/api", "healthcheck"]
ENTRYPOINT ["/api"]
CMD ["serve"]
