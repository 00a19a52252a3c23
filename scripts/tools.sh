#!/usr/bin/env bash
# Build (or find) the external programs the suite drives: the Pulumi CLI and its Python plugins, Docker Compose v2.
# Idempotent and cached under $INFERRY_TOOLS (default ~/.cache/inferry/tools); prints the folder to put on
# PATH as its last line. A `pulumi` already on PATH (the official install) wins over a build.
set -euo pipefail

TOOLS="${INFERRY_TOOLS:-$HOME/.cache/inferry/tools}"
BIN="$TOOLS/bin"
PULUMI_VERSION="${INFERRY_PULUMI_VERSION:-v3.274.1}"
COMPOSE_VERSION="${INFERRY_COMPOSE_VERSION:-v2.40.3}"
mkdir -p "$BIN" "$TOOLS/src"
export CGO_ENABLED=0 GOFLAGS="${GOFLAGS:--buildvcs=false}" GOTOOLCHAIN="${GOTOOLCHAIN:-local}"

say() { echo "tools: $*" >&2; }

# A Go program built as a dependency of a throwaway wrapper module: the dependency's own `replace`
# directives (pulumi's pkg/go.mod has them) are ignored there, where `go install mod@v` refuses them.
go_build() {  # NAME PACKAGE@VERSION LDFLAGS [TAGS]
  local name=$1 modver=$2 ldflags=$3 tags=${4:-} dir="$TOOLS/src/$1-${2##*@}"
  local stamp="$dir/.built"
  if [ -x "$BIN/$name" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$modver" ]; then
    return 0
  fi
  command -v go >/dev/null || { say "building $name needs Go (https://go.dev/dl) or $name on PATH"; exit 1; }
  say "building $name from $modver (cold: minutes; cached afterwards)"
  mkdir -p "$dir"
  if ! (
    cd "$dir"
    [ -f go.mod ] || go mod init "inferry.tools/$name"
    go get "$modver"
    go build -trimpath -tags "$tags" -ldflags "-s -w $ldflags" -o "$BIN/$name.tmp" "${modver%@*}"
  ) >"$dir/build.log" 2>&1; then
    tail -n 30 "$dir/build.log" >&2
    say "building $name failed (full log: $dir/build.log)"
    exit 1
  fi
  mv "$BIN/$name.tmp" "$BIN/$name"
  echo "$modver" >"$stamp"
}

pulumi_tools() {
  if command -v pulumi >/dev/null && [ "$(command -v pulumi)" != "$BIN/pulumi" ]; then
    say "using $(command -v pulumi) ($(pulumi version))"
    return 0
  fi
  go_build pulumi "github.com/pulumi/pulumi/pkg/v3/cmd/pulumi@$PULUMI_VERSION" \
    "-X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=$PULUMI_VERSION" "osusergo grpcnotrace"
  # The two scripts the official distribution ships beside `pulumi` for Python: the program launcher
  # and the dynamic-provider plugin (it runs `python -u -m pulumi.dynamic`).
  local sdk
  sdk=$(cd "$TOOLS/src/pulumi-$PULUMI_VERSION" && go list -m -f '{{.Dir}}' github.com/pulumi/pulumi/sdk/v3)
  for f in cmd/pulumi-language-python-exec dist/pulumi-resource-pulumi-python; do
    install -m 0755 "$sdk/python/$f" "$BIN/$(basename "$f")"
  done
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

pulumi_tools
compose_tool
say "ready: $BIN"
echo "$BIN"
