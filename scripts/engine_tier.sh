#!/usr/bin/env bash
# The engine tier's venvs (tests marked engine_parser): an engine's own Python package, CPU only, so its real
# argument parser and start-up checks run on the command lines inferry renders. `engine_tier.sh [sglang|vllm]`
# (default sglang). Idempotent, cached under $INFERRY_TOOLS/engine-venvs (cold: about 6 GB and 5 minutes each;
# warm: instant); prints the venv's python last.
#
# vLLM's venv is scripts/snapshot_vllm.py's (the one its option snapshot is generated in): CPU use of torch, the
# wheel without its CUDA kernels, its light requirements.
#
# torch comes with its CUDA libraries (it refuses to import without them; nothing uses a GPU), SGLang with
# --no-deps (its dependencies are multi-GB CUDA kernels), then the pinned list of what its server_args module
# imports (found by importing it: sglang/srt/utils/common.py and the arg_groups modules).
set -euo pipefail
cd "$(dirname "$0")/.."
TOOLS="${INFERRY_TOOLS:-$HOME/.cache/inferry/tools}"
VLLM=0.33.0
if [ "${1:-sglang}" = vllm ]; then
  exec "${PYTHON:-python3}" scripts/snapshot_vllm.py --venv-only --version "$VLLM" \
    --workdir "$TOOLS/engine-venvs/vllm-$VLLM"
fi
SGLANG=0.5.23
TORCH=2.14.1  # sglang 0.5.23's Requires-Dist
IMPORTS=(aiohttp==3.14.5 apache-tvm-ffi==0.1.11 ipython==9.18.1 msgspec==0.23.0 numpy==2.4.6 orjson==3.13.0
         packaging==26.4 pillow==13.0.0 psutil==7.2.2 pybase64==1.5.1 pydantic==2.14.4 PyYAML==6.0.4
         pyzmq==27.3.0 requests==2.34.2 starlette==1.10.0 tqdm==4.70.1)
venv="$TOOLS/engine-venvs/sglang-$SGLANG"
stamp="$venv/.ready-$(sha256sum "$0" | cut -c1-16)"
if [ ! -f "$stamp" ]; then
  echo "engine tier: installing sglang $SGLANG and torch $TORCH (CPU use only) into $venv" >&2
  rm -rf "$venv"
  "${PYTHON:-python3}" -m venv "$venv"
  pip=("$venv/bin/python" -m pip install -q --disable-pip-version-check --no-warn-conflicts)
  "${pip[@]}" "torch==$TORCH"
  "${pip[@]}" --no-deps "sglang==$SGLANG"
  "${pip[@]}" "${IMPORTS[@]}"
  "$venv/bin/python" -c "import sglang.srt.server_args" >&2
  touch "$stamp"
fi
echo "$venv/bin/python"
