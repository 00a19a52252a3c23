"""Cost per million tokens: the formula, where tokens/s come from, and the decode estimate's shape."""
from __future__ import annotations

import json

import pytest

from infra.sizing import catalog
from infra.sizing.cost import choose_throughput, cpm, decode_estimate, usd_per_hour
from infra.errors import InferryError
from infra.sizing.measurements import load_measured_tps, measurements_dir, record_measured_tps


def test_cpm_formula_from_facts():
    # docs/facts.md: CPM = hourly cost / (output tokens/s x 3600 / 1e6). H100 at $2.79 and 3,913 tok/s (MLPerf).
    assert cpm(2.79, 3913) == pytest.approx(2.79 / (3913 * 3600 / 1e6))
    assert cpm(2.79, 3913) == pytest.approx(0.198, abs=1e-3)
    with pytest.raises(ValueError):
        cpm(1.0, 0)


def test_usd_per_hour_counts_every_gpu():
    assert usd_per_hour(2.79, 4, 2) == pytest.approx(22.32)


def test_throughput_precedence():
    assert choose_throughput(100.0, 50.0, 10.0, 8).source == "measured"
    assert choose_throughput(None, 50.0, 10.0, 8).source == "stack"
    est = choose_throughput(None, None, 10.0, 8)
    assert est.source == "estimate" and est.detail.startswith("bandwidth-bound decode, 8 sequences")


def test_decode_estimate_follows_bandwidth_and_batch():
    h100, h200, a100 = (catalog.gpu(k) for k in ("H100-80GB", "H200", "A100-80GB"))
    w, kv = 9 * 2**30, 128 * 1024
    assert decode_estimate(w, kv, h200, 10**6, 256)[0] > decode_estimate(w, kv, h100, 10**6, 256)[0] > \
        decode_estimate(w, kv, a100, 10**6, 256)[0]
    tps, batch = decode_estimate(w, kv, h100, 10 * 1024, 1024)  # room for 10 sequences of 1,024 tokens
    assert batch == 10
    assert decode_estimate(w, kv, h100, 10**6, max_seqs=4)[1] == 4
    # one sequence: bound by reading the weights once per token
    single, _ = decode_estimate(w, kv, h100, 1024, max_seqs=1)
    assert single < h100.bandwidth_bytes_per_s / w


def test_measurements_round_trip(tmp_path):
    m = record_measured_tps("eu-ssh", 1234.5, {"concurrency": 32, "tool": "inferry bench"}, root=tmp_path)
    path = measurements_dir(tmp_path) / "eu-ssh.json"
    assert json.loads(path.read_text())["tokens_per_second"] == 1234.5
    got = load_measured_tps("eu-ssh", root=tmp_path)
    assert got == m
    assert load_measured_tps("staging", root=tmp_path) is None
    path.write_text("{not json")
    assert load_measured_tps("eu-ssh", root=tmp_path) is None
    with pytest.raises(InferryError):
        record_measured_tps("../x", 1.0, root=tmp_path)
    with pytest.raises(InferryError):
        record_measured_tps("eu-ssh", 0, root=tmp_path)
