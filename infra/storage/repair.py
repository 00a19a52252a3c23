"""The command that repairs a stored model: re-send exactly the files `verify` found bad, from where the model came.

A plain push or copy cannot repair: it skips a file whose size and sha256 on record (manifest,
object metadata, journal) are right, and a corrupt object keeps both. `--repair FILE` makes
push (or copy) send the named files whatever the records say; verify prints that command.
"""
from __future__ import annotations

import re
import shlex
from collections.abc import Sequence

from infra.storage.manifest import Manifest

# How sync.copy records a copied model's source in its manifest.
_COPIED = re.compile(r"^s3://(?P<bucket>[^/]+)/(?P<prefix>.*) at (?P<endpoint>\S+)$")
_TO = {"--stack": "--to-stack", "--endpoint": "--to-endpoint", "--bucket": "--to-bucket", "--region": "--to-region"}


def repair_argv(manifest: Manifest, bad: Sequence[str], prefix: str, store: Sequence[str]) -> list[str]:
    """argv of `inferry weights push FOLDER ... --repair FILE...` (`copy` for a copied model) re-sending `bad`.

    `store` names the verified store as verify's command line did: --stack NAME, or
    --endpoint URL --bucket NAME [--region R] [--virtual-hosted].
    """
    repair = [arg for path in bad for arg in ("--repair", path)]
    copied = _COPIED.match(manifest.source)
    if copied:
        source = ["--endpoint", copied["endpoint"], "--bucket", copied["bucket"], "--prefix", copied["prefix"]]
        return ["inferry", "weights", "copy", *source, *(_TO.get(a, a) for a in store), "--to-prefix", prefix,
                *repair]
    folder = manifest.source.removeprefix("file://") if manifest.source.startswith("file://") else "FOLDER"
    return ["inferry", "weights", "push", folder, "--prefix", prefix, *store, *repair]


def repair_fix(manifest: Manifest, bad: Sequence[str], prefix: str, store: Sequence[str]) -> str:
    """The fix line verify prints: the exact command, and where its keys come from."""
    argv = repair_argv(manifest, bad, prefix, store)
    text = f"re-send exactly the bad file(s) (a plain push or copy skips them) with:\n    {shlex.join(argv)}"
    if argv[2] == "copy":
        keys = "DEST_AWS_ACCESS_KEY_ID/DEST_AWS_SECRET_ACCESS_KEY" if "--endpoint" in store else "the stack"
        text += (f"\n    (the source store's keys from AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, this store's from "
                 f"{keys})")
    elif argv[3] == "FOLDER":
        text += "\n    (FOLDER: the local model folder; its manifest does not say where it was pushed from)"
    return text
