#!/usr/bin/env bash
# Build (or find) the external programs the suite drives, from Go modules: the Pulumi CLI and its Python plugins,
# Docker Compose v2, Caddy and Pebble (the gateway and its test CA), and for Kubernetes a control plane (kube-apiserver, controller-manager, scheduler, kubectl,
# etcd, kwok), a node (kubelet, kube-proxy, kube-router's NetworkPolicy controller), cluster DNS (CoreDNS), KEDA (operator, metrics adapter), Prometheus and the Pulumi Kubernetes provider. Usage: scripts/tools.sh [all|pulumi|compose|gateway|cluster].
# `pulumi` includes the Python language host (typed `pulumi up`), built when no official one is on PATH.
# Idempotent and cached under $INFERRY_TOOLS (default ~/.cache/inferry/tools); prints the folder to put on
# PATH as its last line. A `pulumi` already on PATH (the official install) wins over a build.
set -euo pipefail

TOOLS="${INFERRY_TOOLS:-$HOME/.cache/inferry/tools}"
BIN="$TOOLS/bin"
PULUMI_VERSION="${INFERRY_PULUMI_VERSION:-v3.274.1}"
COMPOSE_VERSION="${INFERRY_COMPOSE_VERSION:-v2.40.3}"
KUBE_VERSION="${INFERRY_KUBE_VERSION:-v1.36.3}"
ETCD_VERSION="${INFERRY_ETCD_VERSION:-v3.6.16}"
KWOK_VERSION="${INFERRY_KWOK_VERSION:-v0.8.0}"
COREDNS_VERSION="${INFERRY_COREDNS_VERSION:-v1.15.0}"
KEDA_VERSION="${INFERRY_KEDA_VERSION:-v2.21.0}"
PROMETHEUS_VERSION="${INFERRY_PROMETHEUS_VERSION:-v0.316.0}"  # the Go module's version of Prometheus 3.16.0
KUBE_ROUTER_VERSION="${INFERRY_KUBE_ROUTER_VERSION:-v2.1.0}"  # its NetworkPolicy controller, on the test node
PEBBLE_VERSION="${INFERRY_PEBBLE_VERSION:-v2.10.3}"
# pulumi-kubernetes' provider module has no tags: the proxy serves the pseudo-version of v4.25.0's commit
# (2026-01-15; v4.25.0 was released 2026-01-16). The test tier pins the PyPI SDK to 4.25.0 to match.
K8S_PROVIDER_MODULE="github.com/pulumi/pulumi-kubernetes/provider/v4"
K8S_PROVIDER_PSEUDO="${INFERRY_K8S_PROVIDER_PSEUDO:-v4.0.0-20260115033456-f47bc2d6f199}"
K8S_PROVIDER_VERSION="${INFERRY_K8S_PROVIDER_VERSION:-4.25.0}"
mkdir -p "$BIN" "$TOOLS/src"
export CGO_ENABLED=0 GOFLAGS="${GOFLAGS:--buildvcs=false}" GOTOOLCHAIN="${GOTOOLCHAIN:-local}"

say() { echo "tools: $*" >&2; }

# Run a build step (a shell function) in wrapper folder DIR unless DIR/.built holds KEY; its output goes to
# DIR/build.log, shown (tail) only when it fails. Builds live in throwaway wrapper modules: a dependency's
# own `replace` directives (pulumi's pkg/go.mod, k8s.io/kubernetes's) are ignored there, where
# `go install mod@v` refuses them.
cached() {  # DIR KEY LABEL STEP
  local dir=$1 key=$2 label=$3 step=$4
  if [ -f "$dir/.built" ] && [ "$(cat "$dir/.built")" = "$key" ]; then return 0; fi
  command -v go >/dev/null || { say "building $label needs Go (https://go.dev/dl)"; exit 1; }
  say "building $label (cold: minutes; cached afterwards)"
  mkdir -p "$dir"
  if ! (cd "$dir" && "$step") >"$dir/build.log" 2>&1; then
    tail -n 30 "$dir/build.log" >&2
    say "building $label failed (full log: $dir/build.log)"
    exit 1
  fi
  echo "$key" >"$dir/.built"
}

# One binary: NAME from PACKAGE@VERSION with LDFLAGS and TAGS.
go_build() {  # NAME PACKAGE@VERSION LDFLAGS [TAGS]
  _name=$1 _modver=$2 _ldflags=$3 _tags=${4:-}
  [ -x "$BIN/$1" ] || rm -f "$TOOLS/src/$1-${2##*@}/.built"
  cached "$TOOLS/src/$1-${2##*@}" "$2" "$1 from $2" _one_binary
}
_one_binary() {
  [ -f go.mod ] || go mod init "inferry.tools/$_name"
  go get "$_modver"
  go build -trimpath -tags "$_tags" -ldflags "-s -w $_ldflags" -o "$BIN/$_name.tmp" "${_modver%@*}"
  mv "$BIN/$_name.tmp" "$BIN/$_name"
}

pulumi_tools() {
  if command -v pulumi >/dev/null && [ "$(command -v pulumi)" != "$BIN/pulumi" ]; then
    say "using $(command -v pulumi) ($(pulumi version))"
    return 0
  fi
  go_build pulumi "github.com/pulumi/pulumi/pkg/v3/cmd/pulumi@$PULUMI_VERSION" \
    "-X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=$PULUMI_VERSION" "osusergo grpcnotrace"
  # The dynamic-provider plugin the official distribution ships beside `pulumi` (it runs
  # `python -u -m pulumi.dynamic`); the program launcher comes with the language host (language_host).
  local sdk
  sdk=$(cd "$TOOLS/src/pulumi-$PULUMI_VERSION" && go list -m -f '{{.Dir}}' github.com/pulumi/pulumi/sdk/v3)
  install -m 0755 "$sdk/python/dist/pulumi-resource-pulumi-python" "$BIN/pulumi-resource-pulumi-python"
}

# Pulumi's Python language host, which typed `pulumi preview|up` needs to run a project's __main__.py (the
# Automation API's inline programs do not). The official distribution ships it; a build from Go modules cannot
# use its own module (sdk/python/cmd/pulumi-language-python/v3: the module proxy refuses it), but up to v3.68.0
# the same host was a package of the sdk/v3 module, which the proxy serves. That host takes the interpreter from
# PATH (it ignores Pulumi.yaml's `virtualenv:` under a newer CLI): the project's venv must come first on PATH.
# Its launcher script, pulumi-language-python-exec, must sit beside it: the CLI's own version's, which takes
# the old host's arguments (a superset) and matches the Python SDK the program imports.
LANGHOST_VERSION="${INFERRY_LANGHOST_VERSION:-v3.68.0}"
LANGHOST_PKG="github.com/pulumi/pulumi/sdk/v3/python/cmd/pulumi-language-python"
language_host() {
  local found
  found=$(command -v pulumi-language-python || true)
  if [ -n "$found" ] && [ "$found" != "$BIN/pulumi-language-python" ]; then
    say "using $found"
    return 0
  fi
  [ -x "$BIN/pulumi-language-python" ] && [ -x "$BIN/pulumi-language-python-exec" ] || rm -f "$TOOLS/src/pulumi-language-python-$LANGHOST_VERSION/.built"
  cached "$TOOLS/src/pulumi-language-python-$LANGHOST_VERSION" "$LANGHOST_VERSION" \
    "pulumi-language-python $LANGHOST_VERSION" _language_host
}
_language_host() {
  local sdk
  [ -f go.mod ] || go mod init inferry.tools/pulumi-language-python
  go get "$LANGHOST_PKG@$LANGHOST_VERSION"  # the package path first, so go.sum covers its imports
  go build -trimpath -tags "osusergo grpcnotrace" -ldflags "-s -w" -o "$BIN/pulumi-language-python.tmp" "$LANGHOST_PKG"
  sdk=$(go mod download -json "github.com/pulumi/pulumi/sdk/v3@$PULUMI_VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
  install -m 0755 "$sdk/python/cmd/pulumi-language-python-exec" "$BIN/pulumi-language-python-exec"
  mv "$BIN/pulumi-language-python.tmp" "$BIN/pulumi-language-python"
}

# Docker Compose v2, the `docker compose` CLI plugin (Debian 12 packages only the old Python docker-compose).
# A plugin already in a system plugin folder wins (test hosts see those folders).
compose_tool() {
  for d in /usr/libexec/docker/cli-plugins /usr/lib/docker/cli-plugins /usr/local/lib/docker/cli-plugins; do
    [ -x "$d/docker-compose" ] && return 0
  done
  go_build docker-compose "github.com/docker/compose/v2/cmd@$COMPOSE_VERSION" \
    "-X github.com/docker/compose/v2/internal.Version=$COMPOSE_VERSION"
}

# Kubernetes' control plane and kubectl, and the node's kubelet and kube-proxy. k8s.io/kubernetes's go.mod points
# its staging modules (k8s.io/api, client-go, ...) at ./staging: the wrapper replaces each with the published
# v0.<minor>.<patch> of the same release, listed from that go.mod, and sets the version the binaries report.
# The node's binaries are a step of their own (its own wrapper and cache key): adding them did not rebuild the
# control plane, and with the Go build cache that build left they take about a minute.
KUBE_BINS="kube-apiserver kube-controller-manager kube-scheduler kubectl"
KUBE_NODE_BINS="kubelet kube-proxy"
_kubernetes() { _kube_build $KUBE_BINS; }
_kubernetes_node() { _kube_build $KUBE_NODE_BINS; }
_kube_build() {  # BINARY...
  local minor=${KUBE_VERSION#v1.} b gomod m ver
  minor=${minor%%.*}
  for m in component-base/version client-go/pkg/version; do
    ver="${ver:-} -X k8s.io/$m.gitVersion=$KUBE_VERSION -X k8s.io/$m.gitMajor=1 -X k8s.io/$m.gitMinor=$minor"
  done
  [ -f go.mod ] || go mod init inferry.tools/kubernetes
  gomod=$(go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  for m in $(awk '/=> \.\/staging\//{print $1}' "$gomod"); do
    go mod edit -replace "$m=$m@v0.${KUBE_VERSION#v1.}"
  done
  for b in "$@"; do go get "k8s.io/kubernetes/cmd/$b@$KUBE_VERSION"; done
  for b in "$@"; do
    go build -trimpath -ldflags "-s -w $ver" -o "$BIN/$b.tmp" "k8s.io/kubernetes/cmd/$b"
    mv "$BIN/$b.tmp" "$BIN/$b"
  done
}

# The Pulumi Kubernetes provider plugin. Its main package embeds schema-embed.json and
# terraform-mapping-embed.json, which upstream generates (go generate) and does not publish: the wrapper takes
# the main package's files from the module, runs their generate.go with the version, and builds that.
_k8s_provider() {
  local src pkg
  mkdir -p cmd
  [ -f go.mod ] || go mod init inferry.tools/pulumi-resource-kubernetes
  go get "$K8S_PROVIDER_MODULE/cmd/pulumi-resource-kubernetes@$K8S_PROVIDER_PSEUDO"
  src=$(go list -m -f '{{.Dir}}' "$K8S_PROVIDER_MODULE")/cmd/pulumi-resource-kubernetes
  for f in main.go generate.go schema.json terraform-mapping.json; do install -m 0644 "$src/$f" cmd/; done
  pkg=$(go list -m -f '{{.Version}}' github.com/pulumi/pulumi/pkg/v3)  # generate.go's import, same version
  go get "github.com/pulumi/pulumi/pkg/v3/codegen/schema@$pkg"
  (cd cmd && VERSION="$K8S_PROVIDER_VERSION" go run generate.go)
  go build -trimpath -ldflags "-s -w -X $K8S_PROVIDER_MODULE/pkg/version.Version=$K8S_PROVIDER_VERSION" \
    -o "$BIN/pulumi-resource-kubernetes.tmp" ./cmd
  mv "$BIN/pulumi-resource-kubernetes.tmp" "$BIN/pulumi-resource-kubernetes"
}

# A writable copy of a module's own folder in ./src, for modules whose go.mod has replace directives (a wrapper
# module would ignore them and `go install` refuses them).
module_copy() {
  local dir
  dir=$(go mod download -json "$1" | python3 -c 'import json, sys; print(json.load(sys.stdin)["Dir"])')
  rm -rf src && cp -r "$dir" src && chmod -R u+w src
}

# KEDA's operator, its metrics adapter (serves external.metrics.k8s.io to the HPA) and its CRDs
# (config/crd/bases).
_keda() {
  local ldflags="-s -w -X github.com/kedacore/keda/v2/version.Version=$KEDA_VERSION"
  module_copy "github.com/kedacore/keda/v2@$KEDA_VERSION"
  (cd src && GOWORK=off go build -trimpath -ldflags "$ldflags" -o "$BIN/keda.tmp" ./cmd/operator \
    && GOWORK=off go build -trimpath -ldflags "$ldflags" -o "$BIN/keda-adapter.tmp" ./cmd/adapter)
  rm -rf "$TOOLS/keda-crds" && mkdir -p "$TOOLS/keda-crds" && cp src/config/crd/bases/*.yaml "$TOOLS/keda-crds/"
  rm -rf src
  mv "$BIN/keda-adapter.tmp" "$BIN/keda-adapter"
  mv "$BIN/keda.tmp" "$BIN/keda"
}

# Prometheus (the server: scrapes the engine pods for the autoscaler's queue metric). GOWORK=off: the module zip
# ships a go.work naming folders it lacks. Without the builtinassets tag there is no web UI; the API is whole.
_prometheus() {
  local v=${PROMETHEUS_VERSION#v0.}  # v0.316.0 is Prometheus 3.16.0
  module_copy "github.com/prometheus/prometheus@$PROMETHEUS_VERSION"
  (cd src && GOWORK=off go build -trimpath -ldflags "-s -w \
    -X github.com/prometheus/common/version.Version=${v:0:1}.${v:1}" -o "$BIN/prometheus.tmp" ./cmd/prometheus)
  rm -rf src
  mv "$BIN/prometheus.tmp" "$BIN/prometheus"
}

# etcd (Debian's 3.4 is older than Kubernetes 1.36 supports), kwok/kwokctl (runs the control plane from these
# binaries, with fake nodes), the real node's kubelet, kube-proxy and NetworkPolicy agent, CoreDNS (cluster DNS), KEDA's operator,
# Prometheus and the provider.
cluster_tools() {
  cached "$TOOLS/src/kubernetes-$KUBE_VERSION" "$KUBE_VERSION" "$KUBE_BINS $KUBE_VERSION" _kubernetes
  for b in $KUBE_NODE_BINS; do [ -x "$BIN/$b" ] || rm -f "$TOOLS/src/kubernetes-node-$KUBE_VERSION/.built"; done
  cached "$TOOLS/src/kubernetes-node-$KUBE_VERSION" "$KUBE_VERSION" "$KUBE_NODE_BINS $KUBE_VERSION" _kubernetes_node
  go_build etcd "go.etcd.io/etcd/server/v3@$ETCD_VERSION" "-X go.etcd.io/etcd/api/v3/version.GitSHA=release"
  go_build kwokctl "sigs.k8s.io/kwok/cmd/kwokctl@$KWOK_VERSION" "-X sigs.k8s.io/kwok/pkg/consts.Version=$KWOK_VERSION"
  go_build kwok "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION" "-X sigs.k8s.io/kwok/pkg/consts.Version=$KWOK_VERSION"
  go_build coredns "github.com/coredns/coredns@$COREDNS_VERSION" "-X github.com/coredns/coredns/coremain.GitCommit=$COREDNS_VERSION"
  go_build kube-router "github.com/cloudnativelabs/kube-router/v2/cmd/kube-router@$KUBE_ROUTER_VERSION" ""
  [ -x "$BIN/keda" ] && [ -x "$BIN/keda-adapter" ] && [ -d "$TOOLS/keda-crds" ] \
    || rm -f "$TOOLS/src/keda-$KEDA_VERSION/.built"
  cached "$TOOLS/src/keda-$KEDA_VERSION" "$KEDA_VERSION" "keda operator and adapter $KEDA_VERSION" _keda
  [ -x "$BIN/prometheus" ] || rm -f "$TOOLS/src/prometheus-$PROMETHEUS_VERSION/.built"
  cached "$TOOLS/src/prometheus-$PROMETHEUS_VERSION" "$PROMETHEUS_VERSION" "prometheus $PROMETHEUS_VERSION" _prometheus
  cached "$TOOLS/src/pulumi-resource-kubernetes-$K8S_PROVIDER_VERSION" "$K8S_PROVIDER_PSEUDO" \
    "pulumi-resource-kubernetes $K8S_PROVIDER_VERSION" _k8s_provider
}

# The gateway: inferry's Caddy build (caddy/: Caddy 2's standard modules plus inferry's limits module, at the
# version caddy/go.mod pins), and for its tests Let's Encrypt's own test CA, Pebble, with its DNS server
# (pebble-challtestsrv) and the certificate Pebble serves its directory with (test/certs in its module).
CADDY_SRC="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/caddy"
_caddy() {
  local version
  version=$(awk '$1 == "require" && $2 == "github.com/caddyserver/caddy/v2" {print $3}' "$CADDY_SRC/go.mod")
  (cd "$CADDY_SRC" && go build -trimpath -ldflags "-s -w -X github.com/caddyserver/caddy/v2.CustomVersion=$version-inferry" \
    -o "$BIN/caddy.tmp" .)
  mv "$BIN/caddy.tmp" "$BIN/caddy"
}
gateway_tools() {
  # Caddy's standard build too, as its apt package installs it: the tests of what a host without inferry's build
  # is told, and of the config that serves there (limits off).
  go_build caddy-standard "github.com/caddyserver/caddy/v2/cmd/caddy@$(awk '$1 == "require" && $2 == \
    "github.com/caddyserver/caddy/v2" {print $3}' "$CADDY_SRC/go.mod")" ""
  [ -x "$BIN/caddy" ] || rm -f "$TOOLS/src/caddy-inferry/.built"
  cached "$TOOLS/src/caddy-inferry" "$(cd "$CADDY_SRC" && cat go.mod go.sum ./*.go limits/*.go | sha256sum | cut -c1-16)" \
    "caddy (inferry's build: caddy/)" _caddy
  go_build pebble "github.com/letsencrypt/pebble/v2/cmd/pebble@$PEBBLE_VERSION" ""
  go_build pebble-challtestsrv "github.com/letsencrypt/pebble/v2/cmd/pebble-challtestsrv@$PEBBLE_VERSION" ""
  if [ ! -f "$TOOLS/pebble-certs/localhost/cert.pem" ]; then
    local dir
    dir=$(cd "$TOOLS/src/pebble-$PEBBLE_VERSION" && go list -m -f '{{.Dir}}' github.com/letsencrypt/pebble/v2)
    mkdir -p "$TOOLS/pebble-certs" && cp -r "$dir/test/certs/." "$TOOLS/pebble-certs/" && chmod -R u+w "$TOOLS/pebble-certs"
  fi
}

case "${1:-all}" in
  all) pulumi_tools; language_host; compose_tool; gateway_tools; cluster_tools ;;
  gateway) gateway_tools ;;
  pulumi) pulumi_tools; language_host ;;
  compose) compose_tool ;;
  cluster) cluster_tools ;;
  *) say "usage: scripts/tools.sh [all|pulumi|compose|gateway|cluster]"; exit 2 ;;
esac
say "ready: $BIN"
echo "$BIN"
