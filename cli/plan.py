"""`inferry plan STACK`: will the deployment fit its GPUs, and what a million output tokens costs."""
from __future__ import annotations

import json
import shutil
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from cli.common import STORE_SECRETS, check_adapters, err, handle_errors, load_checked, out
from infra.sizing.catalog import GIB
from infra.sizing.measurements import load_measured_tps
from infra.sizing.modelinfo import Reader
from infra.sizing.fit import fix_text, plan_with_fixes
from infra.sizing.plan import Plan
from infra.stack.stackfile import Stack
from infra.sizing.suggest import Option, suggest, why_no_option

WIDTH = 120  # tables stay readable when stdout is not a terminal (rich falls back to 80 columns)
STACK_HELP = "a stack name under stacks/ (e.g. eu-ssh) or a path to a stack file"


def plan_json(p: Plan) -> dict[str, Any]:
    """The plan as plain JSON values (stable keys for machines); null where a figure means nothing (the KV
    budget when nothing is left for it, the headroom and cost of a stack that does not fit)."""
    v, b = p.verdict, p.verdict.budget
    return {
        "model": p.model.arch.key, "architecture_source": p.model.arch_source, "gpu": p.gpu,
        "gpu_count": p.gpu_count, "replicas": p.replicas, "tensor_parallel_size": p.sizing.tp,
        "fits": v.fits, "reason": v.reason, "max_model_len": p.sizing.max_model_len,
        "weights_bytes_per_gpu": b.weights, "weights_source": p.weights_source,
        "usable_bytes_per_gpu": b.usable, "activation_bytes": b.activations, "overhead_bytes": b.overhead,
        "adapter_bytes_per_gpu": b.adapters,
        "kv_budget_bytes_per_gpu": b.kv if b.kv > 0 else None, "kv_bytes_per_token": v.kv_bytes_per_token,
        "kv_bytes_per_token_per_gpu": v.kv_bytes_per_token_per_gpu, "kv_capacity_tokens": v.kv_capacity_tokens,
        "max_concurrency": v.max_concurrency, "headroom_bytes": v.headroom_bytes if v.fits else None,
        "usd_per_hour": round(p.usd_per_hour, 4), "cpm_usd": None if p.cpm_usd is None else round(p.cpm_usd, 4),
        "tokens_per_second": round(p.throughput.tokens_per_second, 1), "tps_source": p.throughput.source,
        "residency": p.residency, "notes": list(v.notes),
        "fixes": [{"field": f.field, "value": f.value, "why": f.why, "set": f.changes} for f in p.fixes],
    }


def _gib(n: int) -> str:
    return f"{n / GIB:,.2f} GiB"


def _table(p: Plan, title: str) -> Table:
    v, b = p.verdict, p.verdict.budget
    t = Table(title=title, show_header=False, title_justify="left")
    rows = [
        ("model", f"{p.model.arch.key} ({p.model.arch_source})"),
        ("GPU", f"{p.gpu_count}x {p.gpu} per replica, {p.replicas} replica(s), tensor parallel {p.sizing.tp}"),
        ("weights per GPU", f"{_gib(b.weights)} ({p.weights_source})"),
        *([("adapter slots per GPU", f"{_gib(b.adapters)} ({p.lora})")] if b.adapters else []),
        ("KV per token", f"{v.kv_bytes_per_token / 1024:,.0f} KiB "
                         f"({v.kv_bytes_per_token_per_gpu / 1024:,.0f} KiB per GPU)"),
        ("KV budget per GPU", f"{_gib(b.kv)} of {_gib(b.usable)} usable" if b.kv > 0
         else f"n/a: nothing left of {_gib(b.usable)} usable"),
        ("KV capacity", f"{v.kv_capacity_tokens:,} tokens"),
        ("max concurrency", f"{v.max_concurrency:,.1f} requests at {p.sizing.max_model_len:,} tokens"),
        ("headroom", f"{_gib(v.headroom_bytes)} beyond one full-context request" if v.fits else "n/a"),
        ("$/hour", f"{p.usd_per_hour:,.2f} (all replicas)"),
        ("CPM", "n/a: it does not fit" if p.cpm_usd is None else
         f"${p.cpm_usd:,.4f} per 1M output tokens at {p.throughput.tokens_per_second:,.0f} tok/s "
         f"per replica [{p.throughput.source}: {p.throughput.detail}]"),
        ("residency", p.residency or "none"),
        ("verdict", ("OK " if v.fits else "DOES NOT FIT: ") + v.reason),
    ] + [("note", n) for n in p.verdict.notes]
    for k, val in rows:
        t.add_row(k, escape(val))  # values hold [brackets]: not markup
    return t


def _suggest_table(options: list[Option]) -> Table:
    t = Table(title="cheapest per million output tokens (estimated tokens/s for every row)", title_justify="left")
    for col in ("#", "provider", "region", "GPU", "GPUs", "$/hour", "tok/s", "CPM $", "KV tokens"):
        t.add_column(col, justify="right" if col not in ("provider", "region", "GPU") else "left")
    for i, o in enumerate(options, 1):
        t.add_row(str(i), o.provider, o.region, o.gpu, str(o.gpus), f"{o.usd_per_hour:.2f}",
                  f"{o.tokens_per_second:,.0f}", f"{o.cpm_usd:.4f}", f"{o.kv_capacity_tokens:,}")
    return t


def _store_reader(s: Stack) -> Reader | None:
    """A reader of the model folder in the stack's weight store (credentials from the stack's secrets; the
    store's errors mapped as the weights commands map them: no key material in a message)."""
    from infra.lifecycle.secrets import resolver
    from infra.storage.remote import stack_reader

    return stack_reader(s, resolver(s))


@handle_errors
def plan(
    stack: str = typer.Argument(..., help=STACK_HELP),
    as_json: bool = typer.Option(False, "--json", help="print JSON for machines"),
    show_suggest: bool = typer.Option(False, "--suggest", help="rank catalog GPUs and providers by CPM"),
    from_store: bool = typer.Option(False, "--from-store", help="read config.json (and each adapter's "
                                    "adapter_config.json) from the weight store"),
) -> None:
    """Will the model fit (weights + KV cache), on which GPU, at what cost per million tokens."""
    # No other secret is read; sizing's findings are this command's own table, verdict and fix.
    s = load_checked(stack, uses=STORE_SECRETS if from_store else frozenset(), own=frozenset({"sizing"}))
    measured = load_measured_tps(s.name)
    if from_store:
        check_adapters(s)
    read = _store_reader(s) if from_store else None
    p = plan_with_fixes(s.deployment, measured.tokens_per_second if measured else None, read=read)
    options = suggest(s.deployment) if show_suggest else []
    if as_json:
        doc = plan_json(p)
        if show_suggest:
            doc["suggest"] = [o.__dict__ for o in options]
        out.print(json.dumps(doc, indent=2), markup=False)
    else:
        wide = Console(highlight=False, width=max(WIDTH, shutil.get_terminal_size().columns))
        wide.print(_table(p, f"plan for {s.name}"))
        if show_suggest and options:
            wide.print(_suggest_table(options))
    if show_suggest and not options:
        err.print(f"--suggest: no option: {why_no_option(s.deployment)}", markup=False)
    if not p.verdict.fits:
        err.print(f"error: {s.name} does not fit: {p.verdict.reason}\n  fix: {fix_text(p)}", markup=False)
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add `plan` to the app."""
    app.command()(plan)
