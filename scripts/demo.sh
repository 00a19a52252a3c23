#!/usr/bin/env bash
# Set up and run the main job on a bundled example stack: no cloud account, GPU or Pulumi CLI needed.
# The main job: will llama-3.1-8b fit on the stack's H100s with its context, and what a million tokens cost.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/inferry validate eu-ssh
.venv/bin/inferry plan eu-ssh
