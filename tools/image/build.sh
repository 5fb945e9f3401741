#!/usr/bin/env bash
# Builds plumb's container image without a container daemon: an OCI image layout
# (https://github.com/opencontainers/image-spec/blob/main/image-layout.md) with one
# layer holding the plumb binary, the shared libraries it links (found with ldd: glibc,
# OpenSSL and zlib for git2's HTTPS), CA certificates, a non-root user (65532) and
# writable /tmp and /var/cache/plumb. Reproducible: files sorted, owners and times
# fixed. Needs bash, coreutils, tar, gzip, ldd.
#
#   tools/image/build.sh [--binary PATH] [--tool PATH]... [--tag TAG] [--out DIR]
#                        [--arch amd64|arm64] [--commit SHA]
#
#   --binary  the plumb binary (default: cargo build --release --locked, then
#             target/release/plumb)
#   --tool    another static binary for /usr/local/bin (e.g. kustomize, helm)
#   --tag     the layout's ref name (default: the crate version)
#   --out     output directory (default: target/image/plumb-oci)
#   --arch    the image's architecture (default: this machine's); a static binary built
#             for another one (tools/release) runs there without libraries
#   --commit  the commit, as the label org.opencontainers.image.revision (default: none)
#
# Push with any OCI tool, e.g. `skopeo copy oci:target/image/plumb-oci:0.1.0
# docker://registry.example.com/plumb/plumb:0.1.0` or `crane push
# target/image/plumb-oci registry.example.com/plumb/plumb:0.1.0`.
set -euo pipefail
cd "$(dirname "$0")/../.."
binary="" out="target/image/plumb-oci" tag="" tools=() arch="" commit=""
while [ $# -gt 0 ]; do
  case "$1" in
    --binary) binary="$2"; shift 2 ;;
    --tool) tools+=("$2"); shift 2 ;;
    --tag) tag="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --arch) arch="$2"; shift 2 ;;
    --commit) commit="$2"; shift 2 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
if [ -z "$binary" ]; then
  cargo build --release --locked -p plumb --bin plumb
  binary=target/release/plumb
fi
[ -x "$binary" ] || { echo "no executable at $binary" >&2; exit 1; }
[ -n "$tag" ] || tag=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
case "${arch:-$(uname -m)}" in
  x86_64 | amd64) arch=amd64 ;;
  aarch64 | arm64) arch=arm64 ;;
  *) echo "unsupported architecture ${arch:-$(uname -m)}" >&2; exit 1 ;;
esac
revision=""
[ -z "$commit" ] || revision=",\"org.opencontainers.image.revision\":\"$commit\""
certs=/etc/ssl/certs/ca-certificates.crt
[ -f "$certs" ] || { echo "no CA bundle at $certs (Debian: apt-get install ca-certificates)" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root="$work/rootfs"
mkdir -p "$root"/{usr/local/bin,etc/ssl/certs,tmp,var/cache/plumb,etc/plumb}
install -m 0755 "$binary" "$root/usr/local/bin/plumb"
for t in "${tools[@]}"; do install -m 0755 "$t" "$root/usr/local/bin/$(basename "$t")"; done
# The shared libraries and the dynamic loader, at the paths the binaries name.
for bin in "$root"/usr/local/bin/*; do
  ldd "$bin" 2>/dev/null | awk '/=> \//{print $3} /^[ \t]*\/[^ ]*ld-linux/{print $1}' || true
done | sort -u | while read -r lib; do
  mkdir -p "$root$(dirname "$lib")"
  cp -L "$lib" "$root$lib"
done
cp -L "$certs" "$root/etc/ssl/certs/ca-certificates.crt"
printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:plumb:/tmp:/sbin/nologin\n' >"$root/etc/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' >"$root/etc/group"
printf 'hosts: files dns\n' >"$root/etc/nsswitch.conf"
chmod 1777 "$root/tmp"

# One gzip layer; its digest (compressed) and diff_id (uncompressed).
layer="$work/layer.tar"
tar --sort=name --mtime=@0 --numeric-owner --owner=0 --group=0 --format=posix \
  --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
  -C "$root" -cf "$layer" .
# /var/cache/plumb belongs to the non-root user: rewrite its owner in a second pass.
tar --delete -f "$layer" ./var/cache/plumb/ 2>/dev/null || true
tar --mtime=@0 --numeric-owner --owner=65532 --group=65532 --format=posix --no-recursion \
  --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
  -C "$root" -rf "$layer" ./var/cache/plumb
diff_id=$(sha256sum "$layer" | cut -d' ' -f1)
gzip -n -9 "$layer"
rm -rf "$out"
mkdir -p "$out/blobs/sha256"
blob() { # file -> moves it into blobs/, prints "digest size"
  local d s
  d=$(sha256sum "$1" | cut -d' ' -f1)
  s=$(stat -c %s "$1")
  mv "$1" "$out/blobs/sha256/$d"
  echo "$d $s"
}
read -r layer_digest layer_size < <(blob "$layer.gz")
cat >"$work/config.json" <<JSON
{"architecture":"$arch","os":"linux","config":{"User":"65532:65532","Entrypoint":["/usr/local/bin/plumb"],"Cmd":["serve"],"Env":["PATH=/usr/local/bin:/usr/bin:/bin","SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt","HOME=/tmp"],"WorkingDir":"/","Labels":{"org.opencontainers.image.title":"plumb","org.opencontainers.image.version":"$tag"$revision}},"rootfs":{"type":"layers","diff_ids":["sha256:$diff_id"]},"history":[{"created_by":"tools/image/build.sh"}]}
JSON
printf '%s' "$(cat "$work/config.json")" >"$work/config.min.json"
read -r config_digest config_size < <(blob "$work/config.min.json")
printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"sha256:%s","size":%s}]}' \
  "$config_digest" "$config_size" "$layer_digest" "$layer_size" >"$work/manifest.json"
read -r manifest_digest manifest_size < <(blob "$work/manifest.json")
printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"annotations":{"org.opencontainers.image.ref.name":"%s"}}]}' \
  "$manifest_digest" "$manifest_size" "$tag" >"$out/index.json"
printf '{"imageLayoutVersion":"1.0.0"}' >"$out/oci-layout"
echo "$out: plumb:$tag sha256:$manifest_digest ($arch, layer $((layer_size / 1024)) KiB)"
