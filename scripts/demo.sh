#!/usr/bin/env bash
# Set up and run the main job on a bundled example stack: no cloud account, GPU or Pulumi CLI needed.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/inferry validate eu-ssh
