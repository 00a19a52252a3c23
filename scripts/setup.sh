#!/usr/bin/env bash
# Idempotent set-up on a fresh Debian/Ubuntu machine with Python 3.11+: a venv with inferry in it.
# With --test it also installs what the test suite needs (OpenSSH server, iproute2, curl, python3, Docker's engine,
# debootstrap, containerd and the CNI plugins) when run as root, and builds the programs the suite drives
# (scripts/tools.sh: the Pulumi CLI, Docker Compose v2, a Kubernetes control plane and node; cached).
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
extras="."
if [ "${1:-}" = "--test" ]; then
  extras=".[test]"
  need=()
  command -v sshd >/dev/null 2>&1 || [ -x /usr/sbin/sshd ] || need+=(openssh-server)
  command -v ip >/dev/null 2>&1 || need+=(iproute2)
  command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || need+=(nginx-light)
  command -v curl >/dev/null 2>&1 || need+=(curl)
  command -v sudo >/dev/null 2>&1 || need+=(sudo)  # SSH tests log in as a non-root user with sudo
  # Test hosts (tests/support/hosts) run their stand-in tools with the system python3: their /root is private.
  [ -x /usr/bin/python3 ] || need+=(python3)
  /usr/bin/python3 -c 'import yaml' >/dev/null 2>&1 || need+=(python3-yaml)
  command -v nsenter >/dev/null 2>&1 || need+=(util-linux)
  # Each docker-runtime test host runs its own Debian dockerd (the suite starts and stops them); its stand-in
  # engine image is built with debootstrap from Debian's packages (tests/support/hosts/image.py).
  [ -x /usr/sbin/dockerd ] && [ -x /usr/bin/docker ] || need+=(docker.io)
  command -v debootstrap >/dev/null 2>&1 || [ -x /usr/sbin/debootstrap ] || need+=(debootstrap)
  # The cluster tests' real node (tests/support/node.py): Debian's containerd (and runc), the CNI plugins, and
  # what kube-proxy drives (iptables, conntrack; nftables for its nftables mode).
  [ -x /usr/bin/containerd ] || need+=(containerd)
  [ -x /usr/lib/cni/bridge ] || need+=(containernetworking-plugins)
  [ -x /usr/sbin/conntrack ] || need+=(conntrack)
  [ -x /usr/sbin/iptables ] || need+=(iptables)
  [ -x /usr/sbin/nft ] || need+=(nftables)
  [ -x /usr/sbin/ipset ] || need+=(ipset)  # kube-router's NetworkPolicy controller on the node (tests/support/netpol.py)
  # The default Kubernetes fetch image (peakcom/s5cmd) is Alpine: its shell and tools are BusyBox, which the
  # fetch script's tests run it under (tests/targets/kubernetes/test_node_cache_scripts.py).
  [ -x /bin/busybox ] || need+=(busybox-static)
  if [ ${#need[@]} -gt 0 ]; then
    if [ "$(id -u)" != 0 ]; then
      echo "the test suite needs: ${need[*]} (run as root, or install them first)" >&2
      exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  fi
fi
# Install only when pyproject.toml changed since the last install (fast re-runs).
stamp=".venv/.inferry-installed-$(sha256sum pyproject.toml | cut -c1-16)${1:-}"
if [ ! -f "$stamp" ]; then
  .venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip
  .venv/bin/python -m pip install -q --disable-pip-version-check -e "$extras"
  rm -f .venv/.inferry-demo  # scripts/demo.sh's plain copy is replaced: the demo now uses this install
  touch "$stamp"
fi
if [ "${1:-}" = "--test" ]; then
  bash scripts/tools.sh >/dev/null
fi
