"""Planning an SSH target from a stack: files per runtime, docker commands, validate checks."""
from __future__ import annotations

import pytest

from infra.errors import ConfigError
from infra.stack.stackfile import load_stack
from infra.targets.ssh.checks import ssh_checks
from infra.targets.ssh.plan import plan_deployment


@pytest.fixture(scope="module")
def eu_ssh():
    return load_stack("eu-ssh").deployment


def test_docker_runtime_puts_the_compose_file(eu_ssh):
    p = plan_deployment(eu_ssh)
    assert [h.label for h in p.hosts] == ["gpu-mad-1", "gpu-mad-2"] and p.max_parallel == 64
    svc = p.hosts[0].service
    paths = sorted(f.path for f in svc.files)
    assert "/etc/inferry/compose.yaml" in paths and all(x.startswith("/etc/inferry/") for x in paths)
    assert not any(f.path.endswith("run-engine.sh") for f in svc.files)
    (w,) = p.hosts[0].weights
    assert (w.model_dir, w.store.bucket, w.store.prefix) == (
        "/var/lib/inferry/weights/llama-3.1-8b-instruct", "inferry-weights", "llama-3.1-8b-instruct")
    # engines listen on loopback on the gateway's host and on the private address elsewhere, never publicly
    assert p.gateway.plan.upstreams == ("127.0.0.1:8000", "10.0.0.11:8000") and p.gateway.conn.address == "203.0.113.10"
    assert [h.service.bind for h in p.hosts] == ["127.0.0.1", "10.0.0.11"]
    compose = {h.label: next(f.content for f in h.service.files if f.path.endswith("compose.yaml")) for h in p.hosts}
    assert "127.0.0.1:8000:8000" in compose["gpu-mad-1"] and "10.0.0.11:8000:8000" in compose["gpu-mad-2"]
    assert p.secret_fields == ("serving.api_key",)
    assert all(e["name"] != "VLLM_API_KEY" for h in p.hosts for e in h.service.spec["env"])  # the edge checks it


def with_target(d, **kw):
    return d.model_copy(update={"target": d.target.model_copy(update=kw)})


def test_checks_name_the_field(eu_ssh):
    assert ssh_checks(eu_ssh) == []
    gw = eu_ssh.target.gateway.model_copy(update={"https_port": 8000})
    (p,) = ssh_checks(with_target(eu_ssh, gateway=gw))
    assert p.path == "serving.port" and p.severity == "error"
    hosts = [eu_ssh.target.hosts[0], eu_ssh.target.hosts[1].model_copy(update={"private_address": None})]
    (p,) = ssh_checks(with_target(eu_ssh, hosts=hosts))
    assert p.path == "target.hosts[1].private_address" and "gpu-mad-1" in p.message
    (w,) = ssh_checks(with_target(eu_ssh, runtime="process"))
    assert w.path == "target.install_docker" and w.severity == "warning"


def test_plan_refuses_a_port_clash(eu_ssh):
    gw = eu_ssh.target.gateway.model_copy(update={"http_port": 8000})
    with pytest.raises(ConfigError) as e:
        plan_deployment(with_target(eu_ssh, gateway=gw))
    assert e.value.paths == ["serving.port"]


def test_a_draft_model_in_the_store_is_fetched_too(eu_ssh):
    spec = {"method": "eagle3", "num_speculative_tokens": 3, "model": "s3://inferry-weights/eagle3-llama-3.1-8b"}
    raw = eu_ssh.model_dump(exclude_none=True)
    d = type(eu_ssh).model_validate({**raw, "engine": {**raw["engine"], "speculative": spec}})
    model, draft = plan_deployment(d).hosts[1].weights
    assert (draft.store.bucket, draft.store.prefix, draft.model_dir) == (
        "inferry-weights", "eagle3-llama-3.1-8b", "/var/lib/inferry/weights/eagle3-llama-3.1-8b")
    assert model.trt_build is False and draft.conn.name == "gpu-mad-2"


@pytest.mark.parametrize("value,hosts,batch", [(1, 8, 1), (3, 2, 2), ("25%", 8, 2), ("10%", 4, 1), ("100%", 5, 5)])
def test_max_unavailable_sizes_the_rolling_batch(value, hosts, batch):
    from infra.targets.ssh.plan import batch_size

    assert batch_size(value, hosts) == batch


@pytest.mark.parametrize("value", [0, "0%", "150%", "a quarter", 2.5])
def test_a_bad_max_unavailable_is_one_bullet_naming_it(cli, tmp_path, value):
    import yaml

    from tests.conftest import ROOT

    doc = yaml.safe_load((ROOT / "stacks" / "Pulumi.eu-ssh.yaml").read_text())
    doc["config"]["inferry:deployment"]["target"]["max_unavailable"] = value
    path = tmp_path / "Pulumi.mu.yaml"
    path.write_text(yaml.safe_dump(doc))
    r = cli("validate", str(path))
    bullets = [ln for ln in r.stderr.splitlines() if ln.lstrip().startswith("•")]
    assert r.exit_code == 1 and len(bullets) == 1 and "target.max_unavailable: expected a count" in bullets[0], r.stderr


def test_destroy_removes_the_weights_unless_the_stack_keeps_them(eu_ssh):
    from infra.stack.stackfile import parse_deployment

    assert [w.keep_on_destroy for h in plan_deployment(eu_ssh).hosts for w in h.weights] == [False, False]
    raw = eu_ssh.model_dump(mode="json", exclude_none=True)
    kept = parse_deployment({**raw, "target": {**raw["target"], "keep_on_destroy": ["weights"]}}, "stack")
    assert [w.keep_on_destroy for h in plan_deployment(kept).hosts for w in h.weights] == [True, True]
    with pytest.raises(ConfigError) as e:
        parse_deployment({**raw, "target": {**raw["target"], "keep_on_destroy": ["logs"]}}, "stack")
    assert e.value.paths == ["target.keep_on_destroy[0]"] and "'weights'" in e.value.render()


def test_plain_http_on_a_public_address_is_a_warning_not_a_default(eu_ssh):
    assert eu_ssh.target.gateway.tls == "acme"  # the bundled stack: HTTPS
    gw = eu_ssh.target.gateway.model_copy(update={"tls": "off", "domains": []})
    (w,) = ssh_checks(with_target(eu_ssh, gateway=gw))
    assert (w.path, w.severity) == ("target.gateway.tls", "warning") and "203.0.113.10" in w.message
