"""`inferry render --out`: where each file goes, the load balancer, stale files removed, foreign folders refused."""
from __future__ import annotations

import json

import yaml

from tests.conftest import STACKS

EU_SSH, AWS_K8S = str(STACKS[1]), str(STACKS[0])


def test_index_says_where_each_file_goes_and_the_balancer_is_rendered(cli, tmp_path):
    r = cli("render", EU_SSH, "--out", str(tmp_path))
    assert r.exit_code == 0, r.output
    index = json.loads((tmp_path / "INDEX.json").read_text())
    where = {f["file"]: (f["hosts"], f["path"], f["mode"]) for f in index["files"]}
    assert where["compose.yaml"] == (["gpu-mad-1", "gpu-mad-2"], "/etc/inferry/compose.yaml", "0644")
    assert where["inferry.env"] == (["gpu-mad-1", "gpu-mad-2"], "/etc/inferry/inferry.env", "0600")
    # two hosts behind a load balancer on gpu-mad-1: its nginx config is part of the render
    assert where["lb-nginx.conf"] == (["gpu-mad-1"], "/etc/inferry/lb/nginx.conf", "0644")
    conf = (tmp_path / "lb-nginx.conf").read_text()
    assert "server 203.0.113.10:8000" in conf and "server 203.0.113.11:8000" in conf and "listen 8080;" in conf
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*where, "INDEX.json"])
    assert "-> gpu-mad-1:/etc/inferry/lb/nginx.conf" in r.output


def test_rerender_removes_the_files_it_no_longer_writes(cli, tmp_path):
    doc = yaml.safe_load(open(EU_SSH).read())
    d = doc["config"]["inferry:deployment"]
    d["target"]["runtime"] = "process"
    d["target"].pop("load_balancer")
    process = tmp_path / "Pulumi.proc.yaml"
    process.write_text(yaml.safe_dump(doc))
    out = tmp_path / "out"
    assert cli("render", EU_SSH, "--out", str(out)).exit_code == 0
    r = cli("render", str(process), "--out", str(out))
    assert r.exit_code == 0, r.output
    names = {p.name for p in out.iterdir()}
    assert "run-engine.sh" in names and "compose.yaml" not in names and "lb-nginx.conf" not in names
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
