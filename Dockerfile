# plumb's image for users with Docker (or any BuildKit builder), with the render tools
# kustomize, helm and sops at the versions the tests run:
#   docker build --build-arg PLUMB_COMMIT=$(git rev-parse HEAD) -t registry.example.com/plumb/plumb:0.1.0 .
# Without a container daemon, tools/image/build.sh writes the same content as an OCI
# image layout (README "Installing in a cluster").
#
# git2 links OpenSSL (HTTPS fetches) and zlib dynamically and reads the system CA
# bundle; SSH fetches use the vendored libssh2 and need no system library. The runtime
# stage holds just those libraries, CA certificates and the non-root user 65532.

# The render tools, pinned to the versions the tests run (tools/testbins/versions.env),
# built from their Go modules as tools/testbins/build.sh builds them.
FROM docker.io/library/golang:1.26-bookworm AS tools
COPY tools/testbins/versions.env /versions.env
RUN . /versions.env \
 && CGO_ENABLED=0 GOBIN=/out go install -trimpath \
    -ldflags="-s -w -X sigs.k8s.io/kustomize/api/provenance.version=v$KUSTOMIZE_VERSION" \
    "sigs.k8s.io/kustomize/kustomize/v5@v$KUSTOMIZE_VERSION" \
 && CGO_ENABLED=0 GOBIN=/out go install -trimpath -ldflags="-s -w" "helm.sh/helm/v3/cmd/helm@v$HELM_VERSION" \
 && CGO_ENABLED=0 GOBIN=/out go install -trimpath -ldflags="-s -w" "github.com/getsops/sops/v3/cmd/sops@v$SOPS_VERSION" \
 && /out/kustomize version && /out/helm version --short && /out/sops --version

FROM docker.io/library/rust:1.95-bookworm AS build
# the commit `plumb version` reports (.git is not in the build context):
#   docker build --build-arg PLUMB_COMMIT=$(git rev-parse HEAD) …
ARG PLUMB_COMMIT=unknown
ENV PLUMB_GIT_COMMIT=$PLUMB_COMMIT
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p plumb --bin plumb \
 && install -D -m 0755 target/release/plumb /out/plumb

FROM docker.io/library/debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates libssl3 zlib1g \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --gid 65532 nonroot \
 && useradd --uid 65532 --gid 65532 --home-dir /tmp --no-create-home --shell /usr/sbin/nologin nonroot \
 && install -d -o 65532 -g 65532 /var/cache/plumb
COPY --from=build /out/plumb /usr/local/bin/plumb
COPY --from=tools /out/kustomize /out/helm /out/sops /usr/local/bin/
ENV SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt HOME=/tmp
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/plumb"]
CMD ["serve"]
