"""`inferry render --out`: where each file goes, the gateway, stale files removed, foreign folders refused."""
from __future__ import annotations

import json

import yaml

from tests.conftest import STACKS

EU_SSH, AWS_K8S = str(STACKS[1]), str(STACKS[0])


def test_index_says_where_each_file_goes_and_the_gateway_is_rendered(cli, tmp_path):
    r = cli("render", EU_SSH, "--out", str(tmp_path))
    assert r.exit_code == 0, r.output
    index = json.loads((tmp_path / "INDEX.json").read_text())
    where = {f["file"]: (f["hosts"], f["path"], f["mode"]) for f in index["files"]}
    # each engine publishes its port on one address only: loopback beside the gateway, the private one elsewhere
    assert where["compose.yaml"] == (["gpu-mad-1"], "/etc/inferry/compose.yaml", "0644")
    assert where["gpu-mad-2.compose.yaml"] == (["gpu-mad-2"], "/etc/inferry/compose.yaml", "0644")
    assert "'127.0.0.1:8000:8000'" in (tmp_path / "compose.yaml").read_text()
    assert "'10.0.0.11:8000:8000'" in (tmp_path / "gpu-mad-2.compose.yaml").read_text()
    assert where["inferry.env"] == (["gpu-mad-1", "gpu-mad-2"], "/etc/inferry/inferry.env", "0600")
    # two hosts behind the gateway on gpu-mad-1: its Caddy config is part of the render, keys redacted
    assert where["gateway-caddy.json"] == (["gpu-mad-1"], "/etc/inferry/gateway/caddy.json", "0600")
    conf = json.loads((tmp_path / "gateway-caddy.json").read_text())
    text = json.dumps(conf)
    assert '"127.0.0.1:8000"' in text and '"10.0.0.11:8000"' in text and "203.0.113.11" not in text
    assert conf["apps"]["tls"]["certificates"]["automate"] == ["llm.example-gpu.eu"]
    assert "Bearer REDACTED-serving-api_key" in text
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*where, "INDEX.json"])
    assert "-> gpu-mad-1:/etc/inferry/gateway/caddy.json" in r.output


def test_rerender_removes_the_files_it_no_longer_writes(cli, tmp_path):
    doc = yaml.safe_load(open(EU_SSH).read())
    d = doc["config"]["inferry:deployment"]
    d["target"]["runtime"] = "process"
    d["target"].pop("gateway")
    process = tmp_path / "Pulumi.proc.yaml"
    process.write_text(yaml.safe_dump(doc))
    out = tmp_path / "out"
    assert cli("render", EU_SSH, "--out", str(out)).exit_code == 0
    r = cli("render", str(process), "--out", str(out))
    assert r.exit_code == 0, r.output
    names = {p.name for p in out.iterdir()}
    assert "run-engine.sh" in names and "compose.yaml" not in names and "gateway-caddy.json" not in names
    assert f"removed {out / 'compose.yaml'}" in r.output
    assert {f["file"] for f in json.loads((out / "INDEX.json").read_text())["files"]} == names - {"INDEX.json"}


def test_a_folder_inferry_did_not_write_is_refused_untouched(cli, tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    r = cli("render", EU_SSH, "--out", str(tmp_path))
    assert r.exit_code == 1 and "did not write (notes.txt)" in r.output and "new or empty folder" in r.output
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]


def test_kubernetes_index_names_the_cluster(cli, tmp_path):
    r = cli("render", AWS_K8S, "--out", str(tmp_path))
    assert r.exit_code == 0, r.output
    files = json.loads((tmp_path / "INDEX.json").read_text())["files"]
    assert files and all(f["hosts"][0].startswith("cluster ") and "namespace inferry" in f["hosts"][0] for f in files)
