#!/usr/bin/env bash
# Build etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok, Gitea, the
# render tools (kustomize, helm, sops) and an OCI registry (crane) from their Go modules
# (through the Go module proxy) into a cache outside the git tree.
#
#   tools/testbins/build.sh [etcd|k8s|kwok|gitea|kustomize|helm|sops|crane|control-plane|all]
#
# (default: all). control-plane = etcd, k8s and kwok (what the demo needs); all = those,
# gitea, kustomize, helm, sops and crane (what the tests need).
#
# Idempotent: a part whose BUILD_INFO exists and whose binary runs is not rebuilt. Once
# `all` has every part, the Go module and build caches are removed to free their disk.
# Cache root: $PLUMB_TESTBINS (default ~/.cache/plumb-testbins); binaries end up in
# $PLUMB_TESTBINS/{etcd,k8s,kwok,gitea,kustomize,helm,sops,crane}/current/bin (Gitea's templates/ and options/ in
# gitea/current/static, its STATIC_ROOT_PATH). A killed build never leaves a directory
# that looks complete (build in a temp dir, then rename).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.env
. "$here/versions.env"
ROOT=${PLUMB_TESTBINS:-$HOME/.cache/plumb-testbins}
mkdir -p "$ROOT"
export GOMODCACHE=$ROOT/go/mod GOCACHE=$ROOT/go/build GOFLAGS=-modcacherw GOTOOLCHAIN=local

log() { printf '[testbins %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }

build_etcd() { # $1 = output dir
  local out=$1
  mkdir -p "$out/src" "$out/bin"
  (cd "$out/src" && go mod init testbins.local/etcd >/dev/null 2>&1 &&
    go get -tool "go.etcd.io/etcd/server/v3@v$ETCD_VERSION" &&
    CGO_ENABLED=0 go build -trimpath \
      -ldflags="-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=v$ETCD_VERSION" \
      -o "$out/bin/etcd" go.etcd.io/etcd/server/v3)
  "$out/bin/etcd" --version >/dev/null
}

build_k8s() { # $1 = output dir
  local out=$1 up_dir up_mod ld p minor
  up_dir=$(cd "$(mktemp -d)" && go mod download -json "k8s.io/kubernetes@v$K8S_VERSION" | jq -r .Dir)
  up_mod=$up_dir/go.mod
  mkdir -p "$out/src" "$out/bin"
  cd "$out/src"
  go mod init testbins.local/k8s >/dev/null 2>&1
  go mod edit -go="$(go mod edit -json "$up_mod" | jq -r .Go)"
  go mod edit -json "$up_mod" | jq -r '.Godebug[]? | "\(.Key)=\(.Value)"' |
    while read -r kv; do go mod edit -godebug="$kv"; done
  go mod edit -json "$up_mod" | jq -r '.Replace[] | select(.New.Path|startswith("./staging/")) | .Old.Path' |
    while read -r m; do go mod edit -replace="$m=$m@v$K8S_STAGING"; done
  go get -tool "k8s.io/kubernetes/cmd/kube-apiserver@v$K8S_VERSION" \
    "k8s.io/kubernetes/cmd/kube-controller-manager@v$K8S_VERSION" \
    "k8s.io/kubernetes/cmd/kube-scheduler@v$K8S_VERSION"
  minor=$(cut -d. -f2 <<<"$K8S_VERSION")
  ld="-s -w"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld+=" -X $p.gitVersion=v$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor"
    ld+=" -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
  done
  CGO_ENABLED=0 go build -trimpath -tags=notest -ldflags="$ld" -o "$out/bin/" \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler
  "$out/bin/kube-apiserver" --version >/dev/null
}

build_kwok() { # $1 = output dir
  local out=$1 kdir first f
  mkdir -p "$out/bin"
  GOBIN="$out/bin" CGO_ENABLED=0 go install -trimpath -ldflags="-s -w" "sigs.k8s.io/kwok/cmd/kwok@v$KWOK_VERSION"
  kdir=$(cd "$(mktemp -d)" && go mod download -json "sigs.k8s.io/kwok@v$KWOK_VERSION" | jq -r .Dir)
  first=1
  for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
    pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
    [ $first = 1 ] || echo '---'
    first=0
    cat "$kdir/kustomize/stage/$f"
  done >"$out/stages.yaml"
  "$out/bin/kwok" --version >/dev/null 2>&1 || "$out/bin/kwok" --help >/dev/null
}

build_gitea() { # $1 = output dir
  # Gitea's go.mod has replace (and on some lines exclude/godebug) directives, so
  # `go install code.gitea.io/gitea@v…` refuses it and a dependency's replace lines are
  # ignored: a wrapper module copies them, and the go line, from the go.mod the proxy
  # serves for the exact tag.
  local out=$1 up_dir up_mod up_go mod have
  up_dir=$(cd "$(mktemp -d)" && go mod download -json "code.gitea.io/gitea@v$GITEA_VERSION" | jq -r .Dir)
  up_mod=$up_dir/go.mod
  up_go=$(go mod edit -json "$up_mod" | jq -r .Go)
  have=$(go env GOVERSION | sed 's/^go//')
  if [ "$(printf '%s\n' "$up_go" "$have" | sort -V | tail -1)" != "$have" ]; then
    log "gitea: v$GITEA_VERSION needs go $up_go, newer than go $have; pick an older GITEA_VERSION"
    return 1
  fi
  # From 1.27 the module declares itself `gitea.dev` while still served as
  # code.gitea.io/gitea: require it under its own name and point that name at the tag.
  mod=$(go mod edit -json "$up_mod" | jq -r .Module.Path)
  mkdir -p "$out/src" "$out/bin" "$out/static"
  cd "$out/src"
  go mod init testbins.local/gitea >/dev/null 2>&1
  go mod edit -go="$up_go"
  if [ "$mod" != code.gitea.io/gitea ]; then
    go mod edit -replace="$mod=code.gitea.io/gitea@v$GITEA_VERSION"
  fi
  go mod edit -json "$up_mod" | jq -r '.Godebug[]? | "\(.Key)=\(.Value)"' |
    while read -r kv; do go mod edit -godebug="$kv"; done
  go mod edit -json "$up_mod" | jq -r '.Replace[]? |
    if .New.Version == null then error("local replace in upstream go.mod: \(.Old.Path)") else
    "\(.Old.Path)\(if .Old.Version then "@"+.Old.Version else "" end)=\(.New.Path)@\(.New.Version)" end' |
    while read -r r; do go mod edit -replace="$r"; done
  go mod edit -json "$up_mod" | jq -r '.Exclude[]? | "\(.Path)@\(.Version)"' |
    while read -r e; do go mod edit -exclude="$e"; done
  go get -tool "$mod@v$GITEA_VERSION"
  # `sqlite` compiles in mattn/go-sqlite3 (cgo, gcc); `sqlite_unlock_notify` is what
  # Gitea's Makefile adds with it. No `bindata`: templates/ and options/ are read from
  # STATIC_ROOT_PATH, so they are copied out of the module.
  CGO_ENABLED=1 go build -trimpath -tags 'sqlite sqlite_unlock_notify' \
    -ldflags "-s -w -X main.Version=$GITEA_VERSION -X 'main.Tags=sqlite sqlite_unlock_notify'" \
    -o "$out/bin/gitea" "$mod"
  cp -r "$up_dir/templates" "$up_dir/options" "$out/static/"
  chmod -R u+w "$out/static"
  "$out/bin/gitea" --version >/dev/null
}

build_kustomize() { # $1 = output dir
  # The kustomize CLI module pins its own kustomize/api; `go install mod@version` keeps
  # exactly the versions its go.mod names (no replace directives in released tags).
  local out=$1
  mkdir -p "$out/bin"
  GOBIN="$out/bin" CGO_ENABLED=0 go install -trimpath \
    -ldflags="-s -w -X sigs.k8s.io/kustomize/api/provenance.version=v$KUSTOMIZE_VERSION" \
    "sigs.k8s.io/kustomize/kustomize/v5@v$KUSTOMIZE_VERSION"
  "$out/bin/kustomize" version >/dev/null
}

build_helm() { # $1 = output dir
  # `helm template` only (plumb applies); no replace directives in released tags.
  local out=$1
  mkdir -p "$out/bin"
  GOBIN="$out/bin" CGO_ENABLED=0 go install -trimpath -ldflags="-s -w" "helm.sh/helm/v3/cmd/helm@v$HELM_VERSION"
  "$out/bin/helm" version --short >/dev/null
}

build_sops() { # $1 = output dir
  # sops decrypts SOPS-encrypted files at render time; age-keygen makes the tests' keys.
  local out=$1
  mkdir -p "$out/bin"
  GOBIN="$out/bin" CGO_ENABLED=0 go install -trimpath -ldflags="-s -w" "github.com/getsops/sops/v3/cmd/sops@v$SOPS_VERSION"
  GOBIN="$out/bin" CGO_ENABLED=0 go install -trimpath -ldflags="-s -w" "filippo.io/age/cmd/age-keygen@v$AGE_VERSION"
  "$out/bin/sops" --version >/dev/null
}

build_crane() { # $1 = output dir
  # `crane registry serve`: an in-memory OCI registry for the chart-source tests.
  local out=$1
  mkdir -p "$out/bin"
  GOBIN="$out/bin" CGO_ENABLED=0 go install -trimpath -ldflags="-s -w" \
    "github.com/google/go-containerregistry/cmd/crane@v$CRANE_VERSION"
  "$out/bin/crane" version >/dev/null
}

check_bin() { # component -> the binary that proves a build
  case $1 in etcd) echo etcd ;; k8s) echo kube-apiserver ;; kwok) echo kwok ;; gitea) echo gitea ;; kustomize) echo kustomize ;; helm) echo helm ;; sops) echo sops ;; crane) echo crane ;; esac
}

ensure() { # $1 = etcd | k8s | kwok
  local c=$1 vers key dest tmp start secs bin
  case $c in
  etcd) vers="ETCD_VERSION=$ETCD_VERSION" ;;
  k8s) vers="K8S_VERSION=$K8S_VERSION K8S_STAGING=$K8S_STAGING" ;;
  kwok) vers="KWOK_VERSION=$KWOK_VERSION" ;;
  gitea) vers="GITEA_VERSION=$GITEA_VERSION" ;;
  kustomize) vers="KUSTOMIZE_VERSION=$KUSTOMIZE_VERSION" ;;
  helm) vers="HELM_VERSION=$HELM_VERSION" ;;
  sops) vers="SOPS_VERSION=$SOPS_VERSION AGE_VERSION=$AGE_VERSION" ;;
  crane) vers="CRANE_VERSION=$CRANE_VERSION" ;;
  esac
  key=$( { echo "$vers"; declare -f "build_$c"; go version; } | sha256sum | cut -c1-12)
  dest=$ROOT/$c/$key
  bin=$dest/bin/$(check_bin "$c")
  if [ -f "$dest/BUILD_INFO" ] && [ -x "$bin" ]; then
    ln -sfn "$key" "$ROOT/$c/current"
    log "$c: cached at $dest"
    return 0
  fi
  local avail need=8000000
  # the control plane and Gitea need ~8 GB of module and build cache; a render tool ~1 GB
  case $c in kustomize | helm | sops | crane) need=1000000 ;; esac
  avail=$(df -Pk "$ROOT" | awk 'NR==2{print $4}')
  if [ "$avail" -lt "$need" ]; then
    log "$c: need ~$((need / 1000000)) GB free under $ROOT, have $((avail / 1024)) MB"
    return 1
  fi
  mkdir -p "$ROOT/$c"
  tmp=$(mktemp -d "$ROOT/$c/.tmp.XXXX")
  log "$c: building ($vers) into $dest"
  start=$(date +%s)
  # `set -e` does not reach into a function called from a condition, so the build's own
  # status (its last step: the build or a run of the binary) is checked here: a failed
  # build never writes BUILD_INFO.
  ("build_$c" "$tmp") || { log "$c: build failed (its work is in $tmp)"; return 1; }
  secs=$(($(date +%s) - start))
  {
    echo "$vers"
    go version
    echo "built: $(date -u +%FT%TZ) in ${secs}s"
    (cd "$tmp/bin" && du -sh ./*)
  } >"$tmp/BUILD_INFO"
  rm -rf "$tmp/src/.cache" 2>/dev/null || true
  rm -rf "$dest"
  mv -T "$tmp" "$dest"
  ln -sfn "$key" "$ROOT/$c/current"
  log "$c: built in ${secs}s"
  sed 's/^/    /' "$dest/BUILD_INFO" >&2
}

trim_go_caches() {
  # Every part is built: the Go module and build caches (~9 GB) are needed again only when
  # a version in versions.env changes, and a test build needs that disk for its binaries.
  [ -d "$ROOT/go" ] || return 0
  log "go caches: removing $(du -sh "$ROOT/go" | cut -f1) under $ROOT/go (every part is built)"
  # only disk is at stake: a cache that cannot be removed is reported, never fatal
  go clean -cache -modcache 2>/dev/null || chmod -R u+w "$ROOT/go" 2>/dev/null || true
  rm -rf "$ROOT/go" || log "go caches: could not remove all of $ROOT/go"
}

main() {
  local what=${1:-all} c
  exec 9>"$ROOT/.lock"
  flock 9
  command -v go >/dev/null || { log "go is not installed"; exit 1; }
  command -v jq >/dev/null || { log "jq is not installed"; exit 1; }
  log "go: $(go version); GOPROXY=$(go env GOPROXY)"
  case $what in
  all)
    for c in etcd k8s kwok gitea kustomize helm sops crane; do ensure "$c" || exit 1; done
    trim_go_caches
    ;;
  control-plane) for c in etcd k8s kwok; do ensure "$c" || exit 1; done ;;
  etcd | k8s | kwok | gitea | kustomize | helm | sops | crane) ensure "$what" || exit 1 ;;
  *) log "usage: $0 [etcd|k8s|kwok|gitea|kustomize|helm|sops|crane|control-plane|all]"; exit 2 ;;
  esac
  echo "$ROOT"
}
main "$@"
