# plumb's image for users with Docker (or any BuildKit builder):
#   docker build -t registry.example.com/plumb/plumb:0.1.0 .
# Without a container daemon, tools/image/build.sh writes the same content as an OCI
# image layout (README "Installing in a cluster").
#
# git2 links OpenSSL (HTTPS fetches) and zlib dynamically and reads the system CA
# bundle; SSH fetches use the vendored libssh2 and need no system library. The runtime
# stage holds just those libraries, CA certificates and the non-root user 65532.

FROM docker.io/library/rust:1.95-bookworm AS build
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
ENV SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt HOME=/tmp
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/plumb"]
CMD ["serve"]
