#!/usr/bin/env bash
# Set up (venv, packages, OpenSSH server) and run the whole test suite. Extra args go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --test
# The programs scripts/tools.sh built (or found): the Pulumi CLI and its Python plugins, first on PATH.
PATH="$(bash scripts/tools.sh 2>/dev/null | tail -n 1):$PATH"
export PATH
exec .venv/bin/python -m pytest "$@"
