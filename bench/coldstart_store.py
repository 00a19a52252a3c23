"""The cold-start bench's store side: a model of N GiB pushed to it, and `s5cmd cp` from it (the fetch's floor)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from up import KEYS, MODEL
from weights import make_model, tool

BUCKET = "inferry-weights"
Times = dict[str, list[float]]


def push_model(server, work: Path, gib: int) -> str:
    """A model of `gib` GiB (512 MiB shards and small files) in the store, each object read once; returns its prefix.
    The test server computes an object's MD5 on its first read (about 0.65 s of its CPU per 512 MiB): untimed here,
    or the first timed run would pay it and the floor after it would not."""
    from infra.storage.settings import StoreSettings
    from infra.storage.sync import push

    folder = work / f"model-{gib}g"
    make_model(folder, gib << 30, 512 << 20)
    (folder / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "hidden_size": 4096,
                                                    "num_hidden_layers": 32, "num_attention_heads": 32,
                                                    "num_key_value_heads": 8, "vocab_size": 128256,
                                                    "max_position_embeddings": 131072, "torch_dtype": "bfloat16"}))
    prefix = f"{MODEL}-{gib}g"
    push(StoreSettings(server.endpoint, server.region, BUCKET, *KEYS), folder, prefix, show=False)
    shutil.rmtree(folder)
    subprocess.run([tool("s5cmd"), "--endpoint-url", server.endpoint, "cp", f"s3://{BUCKET}/{prefix}/*", f"{folder}/"],
                   env={**os.environ, "AWS_ACCESS_KEY_ID": KEYS[0], "AWS_SECRET_ACCESS_KEY": KEYS[1],
                        "AWS_REGION": server.region}, capture_output=True, check=True)
    shutil.rmtree(folder)
    return prefix


def s5cmd_floor(run_in, server, prefix: str, dest: str) -> float:
    """Seconds of `s5cmd cp` of the prefix into a fresh folder, run by `run_in` (a host's or the node's shell)."""
    s5 = tool("s5cmd")
    os.sync()
    run_in(f"rm -rf {dest} && sync")
    cmd = (f"AWS_ACCESS_KEY_ID={KEYS[0]} AWS_SECRET_ACCESS_KEY={KEYS[1]} AWS_REGION={server.region} "
           f"{s5} --endpoint-url {server.endpoint} cp 's3://{BUCKET}/{prefix}/*' {dest}/ >/dev/null")
    t0 = time.perf_counter()  # the copy alone, as inferry's fetch phase: neither waits for the disk (no sync)
    r = run_in(cmd)
    seconds = time.perf_counter() - t0
    if r.returncode:
        sys.exit(f"s5cmd failed: {r.stderr[-500:]}")
    run_in(f"rm -rf {dest} && sync")
    return seconds
