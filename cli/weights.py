"""`inferry weights push|pull|copy|verify|ls`: move and check model weights in S3-compatible stores."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Optional

import typer

from cli.common import handle_errors, out
from infra.errors import InferryError, StorageError
from infra.storage.settings import MiB, Origin, StoreSettings

app = typer.Typer(help="Model weights in S3-compatible stores: push, pull, copy, verify, ls.", no_args_is_help=True)

STACK = typer.Option(None, "--stack", help="take endpoint, bucket and keys from this stack's storage section")
ENDPOINT = typer.Option(None, "--endpoint", help="S3 endpoint URL (keys: see below)")
# In the epilog, which spans the terminal: the option column is narrow and rich cuts long words there.
KEYS = ("Keys: --stack takes them from the stack's storage section; --endpoint from the environment variables "
        "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY.")
DEST_KEYS = KEYS + (" Destination: --to-stack, or with --to-endpoint the environment variables "
                    "DEST_AWS_ACCESS_KEY_ID and DEST_AWS_SECRET_ACCESS_KEY.")
REGION = typer.Option("us-east-1", "--region", help="region for SigV4 signing (with --endpoint)")
BUCKET = typer.Option(None, "--bucket", help="bucket name (with --endpoint)")
PREFIX = typer.Option(None, "--prefix", "-p", help="model folder in the bucket (default: the stack's model.weights)")
CONCURRENCY = typer.Option(8, "--concurrency", min=1, max=256, help="parallel part transfers")
PART_MIB = typer.Option(32, "--part-size-mib", min=5, max=5120,
                        help="multipart part size in MiB (a pull of a model whose manifest has part digests uses "
                             "the part size it was pushed with)")
VIRTUAL = typer.Option(False, "--virtual-hosted", help="virtual-hosted addressing instead of path style")
REPAIR = typer.Option(None, "--repair", metavar="FILE",
                      help="send this file even if the store seems to hold it (repeatable; what verify names)")
CREATE = typer.Option(False, "--create-bucket",
                      help="create the destination bucket when it does not exist (`inferry up` adopts it later)")


def _settings(stack: str | None, endpoint: str | None, region: str, bucket: str | None, concurrency: int,
              part_mib: int, virtual: bool, env_prefix: str = "", flag: str = "",
              dest: bool = False) -> tuple[StoreSettings, str | None]:
    """(settings, the stack's default model prefix) from --stack or --endpoint/--bucket."""
    tuning = {"concurrency": concurrency, "part_size": part_mib * MiB}
    if stack:
        from infra.lifecycle.secrets import resolver
        from infra.stack.stackfile import load_stack

        s = load_stack(stack)
        fix = (f"pass --create-bucket to create it (`inferry up {s.name}` also does), or fix storage.bucket in "
               f"{s.path}" if dest else f"push the model first (`inferry weights push FOLDER --stack {stack} "
               f"--create-bucket`), or fix storage.bucket in {s.path}")
        settings = StoreSettings.from_stack(s, resolver(s), **tuning, origin=Origin(missing_bucket=fix))
        return settings, s.deployment.model.weights_prefix
    if not endpoint or not bucket:
        raise InferryError("no store given", f"pass --{flag}stack NAME, or --{flag}endpoint URL and --{flag}bucket NAME")
    import re

    from infra.stack.storenames import BUCKET_NAME, endpoint_problem

    problem = endpoint_problem(endpoint)
    if problem:
        raise InferryError(f"{endpoint!r} is not an S3 endpoint URL: {problem}",
                           f"pass --{flag}endpoint http(s)://HOST[:PORT]", where=f"--{flag}endpoint")
    if not re.match(BUCKET_NAME, bucket):
        raise InferryError(f"{bucket!r} is not a valid S3 bucket name",
                           "use 3-63 lowercase letters, digits, dots and hyphens", where=f"--{flag}bucket")
    fix = (f"pass --create-bucket to create it, or check --{flag}bucket" if dest
           else f"check --{flag}bucket, or push the model first (weights push ... --create-bucket)")
    style = "virtual" if virtual else "path"
    return StoreSettings.from_env(endpoint, region, bucket, style, prefix=env_prefix,
                                  origin=Origin.options(flag, env_prefix, fix), **tuning), None


def _prefix(given: str | None, default: str | None) -> str:
    prefix = (given or default or "").strip("/")
    if not prefix:
        raise InferryError("no model prefix", "pass --prefix MODEL (the model's folder in the bucket)")
    return prefix


def _create(s: StoreSettings, wanted: bool) -> None:
    """--create-bucket: make the destination bucket exist before anything is sent."""
    if not wanted:
        return
    from infra.storage.bucket import ensure_bucket  # imports pulumi (0.5 s): only when asked

    if ensure_bucket(s):
        out.print(f"created bucket {s.bucket} at {s.endpoint}", markup=False)


@app.command(epilog=KEYS)
@handle_errors
def push(folder: Path = typer.Argument(..., help="local model folder (Hugging Face snapshot layout)"),
         prefix: Optional[str] = typer.Option(None, "--prefix", "-p", help="model folder in the bucket (default: "
                                              "the stack's model.weights, else FOLDER's name)"),
         stack: Optional[str] = STACK, endpoint: Optional[str] = ENDPOINT,
         region: str = REGION, bucket: Optional[str] = BUCKET, concurrency: int = CONCURRENCY,
         part_size_mib: int = PART_MIB, virtual_hosted: bool = VIRTUAL, repair: Optional[list[str]] = REPAIR,
         create_bucket: bool = CREATE) -> None:
    """Upload a model folder; unchanged files are skipped, an interrupted push resumes inside the file it was on."""
    from infra.storage.sync import push as run

    s, default = _settings(stack, endpoint, region, bucket, concurrency, part_size_mib, virtual_hosted, dest=True)
    name = _prefix(prefix, default or folder.resolve().name)
    _create(s, create_bucket)
    out.print(run(s, folder, name, repair=tuple(repair or ())).summary, markup=False)


@app.command(epilog=KEYS)
@handle_errors
def pull(folder: Path = typer.Argument(..., help="local folder to fill"), prefix: Optional[str] = PREFIX,
         stack: Optional[str] = STACK, endpoint: Optional[str] = ENDPOINT, region: str = REGION,
         bucket: Optional[str] = BUCKET, concurrency: int = CONCURRENCY, part_size_mib: int = PART_MIB,
         virtual_hosted: bool = VIRTUAL) -> None:
    """Download a complete model, checking every byte against the manifest's xxh3-128 digests (per part where it has
    them; sha256 for manifests written before xxh3); an interrupted pull resumes inside the file it was on."""
    from infra.storage.sync import pull as run

    s, default = _settings(stack, endpoint, region, bucket, concurrency, part_size_mib, virtual_hosted)
    out.print(run(s, _prefix(prefix, default), folder).summary, markup=False)


@app.command(epilog=DEST_KEYS)
@handle_errors
def copy(prefix: Optional[str] = PREFIX, stack: Optional[str] = STACK, endpoint: Optional[str] = ENDPOINT,
         region: str = REGION, bucket: Optional[str] = BUCKET,
         to_prefix: Optional[str] = typer.Option(None, "--to-prefix", help="destination folder (default: the same)"),
         to_stack: Optional[str] = typer.Option(None, "--to-stack", help="destination stack (its storage section)"),
         to_endpoint: Optional[str] = typer.Option(None, "--to-endpoint",
                                                   help="destination S3 endpoint URL (keys: see below)"),
         to_region: str = typer.Option("us-east-1", "--to-region", help="destination region for SigV4 signing "
                                       "(with --to-endpoint)"),
         to_bucket: Optional[str] = typer.Option(None, "--to-bucket", help="destination bucket (with --to-endpoint; "
                                                 "alone: another bucket of the source store)"),
         concurrency: int = CONCURRENCY, part_size_mib: int = PART_MIB, virtual_hosted: bool = VIRTUAL,
         repair: Optional[list[str]] = REPAIR, create_bucket: bool = CREATE) -> None:
    """Copy a model between stores (other endpoint and keys: streamed; same store: server side)."""
    from infra.storage.sync import copy as run

    src, default = _settings(stack, endpoint, region, bucket, concurrency, part_size_mib, virtual_hosted)
    if to_stack or to_endpoint:
        dst, _ = _settings(to_stack, to_endpoint, to_region, to_bucket, concurrency, part_size_mib, virtual_hosted,
                           env_prefix="DEST_", flag="to-", dest=True)
    elif to_bucket:
        fix = "pass --create-bucket to create it, or check --to-bucket"
        dst = replace(src.with_bucket(to_bucket), origin=replace(src.origin, missing_bucket=fix))
    else:
        dst = src
    source = _prefix(prefix, default)
    target = (to_prefix or source).strip("/")
    if dst == src and target == source:
        raise StorageError("source and destination are the same", "pass --to-prefix, --to-bucket or --to-stack")
    _create(dst, create_bucket)
    out.print(run(src, source, dst, target, repair=tuple(repair or ())).summary, markup=False)


@app.command(epilog=KEYS)
@handle_errors
def verify(prefix: Optional[str] = PREFIX, stack: Optional[str] = STACK, endpoint: Optional[str] = ENDPOINT,
           region: str = REGION, bucket: Optional[str] = BUCKET, concurrency: int = CONCURRENCY,
           part_size_mib: int = PART_MIB, virtual_hosted: bool = VIRTUAL) -> None:
    """Re-read every stored file and compare size, sha256 and xxh3-128 (whole and per part) with the manifest.

    Exits 1 naming the files that do not match.

    The fix it prints is the exact command that re-sends those files (push --repair, or copy --repair
    for a model that was copied from another store).
    """
    from infra.storage.repair import repair_fix
    from infra.storage.verify import verify as run

    s, default = _settings(stack, endpoint, region, bucket, concurrency, part_size_mib, virtual_hosted)
    name = _prefix(prefix, default)
    result = run(s, name)
    if not result.ok:
        lines = "; ".join(f"{b.path}: {b.problem}" for b in result.bad)
        store = _store_flags(stack, endpoint, region, bucket, virtual_hosted)
        raise StorageError(f"{len(result.bad)} of {len(result.manifest.files)} file(s) do not match the manifest: "
                           f"{lines}", repair_fix(result.manifest, [b.path for b in result.bad], name, store),
                           where=s.where(name))
    out.print(f"OK {len(result.manifest.files)} file(s), {result.manifest.total / 1e6:,.1f} MB match "
              f"{s.where(name)}", markup=False)


def _store_flags(stack: str | None, endpoint: str | None, region: str, bucket: str | None,
                 virtual: bool) -> list[str]:
    """The options that named the store on this command line, for a command printed to run next."""
    if stack:
        return ["--stack", stack]
    flags = ["--endpoint", endpoint or "", "--bucket", bucket or ""]
    flags += ["--region", region] if region != "us-east-1" else []
    return flags + (["--virtual-hosted"] if virtual else [])


@app.command("ls", epilog=KEYS)
@handle_errors
def ls_(prefix: str = typer.Option("", "--prefix", "-p", help="only under this folder (default: the whole bucket)"),
        stack: Optional[str] = STACK, endpoint: Optional[str] = ENDPOINT, region: str = REGION,
        bucket: Optional[str] = BUCKET, virtual_hosted: bool = VIRTUAL,
        as_json: bool = typer.Option(False, "--json", help="print JSON for machines")) -> None:
    """List the models in the bucket (complete ones have a manifest)."""
    import json
    from dataclasses import asdict

    from infra.storage.verify import ls

    s, _ = _settings(stack, endpoint, region, bucket, 4, 32, virtual_hosted)
    models = ls(s, prefix.strip("/"))
    if as_json:
        out.print(json.dumps([asdict(m) for m in models], indent=2), markup=False)
        return
    for m in models:
        state = f"complete {m.created}" if m.complete else "INCOMPLETE (no manifest)"
        out.print(f"{m.prefix or '.'}  {m.files} file(s)  {m.total / 1e6:,.1f} MB  {state}", markup=False)
    if not models:
        out.print(f"no models under {s.where(prefix)}", markup=False)


def register(root: typer.Typer) -> None:
    """Add `inferry weights ...` to the app."""
    root.add_typer(app, name="weights")
