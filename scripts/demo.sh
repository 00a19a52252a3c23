#!/usr/bin/env bash
# Set up and run the main job on a bundled example stack: no cloud account, GPU or Pulumi CLI needed.
# The main job: will llama-3.1-8b fit on the stack's H100s with its context, and what a million tokens cost.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
say() { echo "demo: $*"; }
if [ ! -x .venv/bin/python ]; then
  say "creating .venv"
  "$PY" -m venv .venv
fi
# A plain install (`pip install .`), not setup.sh's editable one: setuptools warns on every editable install
# of this layout (templates/ and stacks/ are mapped into the package), and the demo needs no live link to the
# sources: it reinstalls when one changed (the tree hash below), seconds once the dependencies are in. When
# setup.sh (or test.sh) installed this pyproject.toml editable, that install serves the demo and is left
# alone: replacing it would leave the tests on a stale copy.
hash=$(sha256sum pyproject.toml | cut -c1-16)
tree=$(find cli infra templates stacks pyproject.toml -type f ! -name '*.pyc' -print0 | sort -z \
  | xargs -0 sha256sum | sha256sum | cut -c1-16)
if ls .venv/.inferry-installed-"$hash"* >/dev/null 2>&1 && [ ! -f .venv/.inferry-demo ]; then
  say "using the inferry that scripts/setup.sh installed in .venv"
elif [ "$(cat .venv/.inferry-demo 2>/dev/null)" != "$tree" ]; then
  if [ -f .venv/.inferry-demo ]; then
    say "reinstalling inferry into .venv (its sources changed)"
  else
    say "installing inferry and its dependencies into .venv (about a minute the first time)"
  fi
  .venv/bin/python -m pip install -q --disable-pip-version-check .
  echo "$tree" > .venv/.inferry-demo
fi
say "checking the example stack eu-ssh (inferry validate eu-ssh)"
.venv/bin/inferry validate eu-ssh
say "sizing and pricing it (inferry plan eu-ssh)"
.venv/bin/inferry plan eu-ssh
