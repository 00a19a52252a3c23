"""The same stack on Kubernetes runs the same engine as on SSH: image, command line and environment.

Under Pulumi's mocks: what is compared is what the program asks for, on both targets, with no cluster."""
from __future__ import annotations

import yaml

from infra.targets.ssh.render import behind_gateway, ssh_spec
from infra.stack.stackfile import load_stack
from infra.targets.kubernetes.deploy import spec_for
from infra.targets.kubernetes.manifests import objects, render_kubernetes
from tests.support.harness import run_main
from tests.support.kubernetes_stacks import K8S_STACK, SSH_TWIN


def _engine_container(manifests):
    deployment = next(m for m in manifests if m["kind"] == "Deployment" and not m["metadata"]["name"].endswith(
        "-gateway"))
    return deployment["spec"]["template"]["spec"]["containers"][0]


def test_engine_container_is_the_ssh_twins_engine():
    k8s, ssh = load_stack(str(K8S_STACK)), load_stack(str(SSH_TWIN))
    # What the SSH target runs under docker for the same model and engine sections: both behind their gateway,
    # so neither engine carries the client key.
    twin = behind_gateway(ssh_spec(ssh), "127.0.0.1", "docker")
    container = _engine_container(objects(k8s.deployment, spec_for(k8s.deployment), k8s.name))
    assert container["image"] == twin.image
    assert container["command"] + container["args"] == list(twin.argv)
    assert container["ports"][0]["containerPort"] == twin.listen_port
    env = {}
    for e in container.get("env", []):
        env[e["name"]] = e.get("value") or ("secret", e["valueFrom"]["secretKeyRef"]["key"])
    assert env == {e.name: e.value or ("secret", e.secret_field) for e in twin.env}


def test_render_hook_writes_the_kubernetes_stack_and_nothing_for_ssh():
    files = render_kubernetes(load_stack(str(K8S_STACK)))
    assert any(name.endswith(".yaml") and "-deployment-" in name for name in files)
    assert yaml.safe_load(next(iter(files.values())))["kind"] == "Namespace"
    assert render_kubernetes(load_stack(str(SSH_TWIN))) == {}


def test_program_builds_the_kubernetes_target_for_the_bundled_stack():
    mocks, exports = run_main(K8S_STACK)
    assert exports["endpoint"].startswith("http://inferry-llama-3-1-8b-instruct-gateway.inferry.svc")
    assert exports["endpoints"] == [exports["endpoint"]]
    assert mocks.of_type("kubernetes:apps/v1:Deployment") and mocks.of_type("inferry:targets:KubernetesTarget")
    ssh_mocks, _ = run_main(SSH_TWIN)
    assert not [r for r in ssh_mocks.resources if r.type.startswith("kubernetes:")]


def test_cli_render_writes_applyable_manifests_without_secret_values(cli, tmp_path, monkeypatch):
    from tests.support.kubernetes_schema import validate

    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE", "never-read")
    result = cli("render", str(K8S_STACK), "--out", str(tmp_path))
    assert result.exit_code == 0, result.output
    written = sorted(tmp_path.glob("*.yaml"))
    assert [p.name[:2] for p in written] == [f"{i:02d}" for i in range(len(written))]  # kubectl apply order
    for path in written:
        validate(yaml.safe_load(path.read_text()))
    secret = yaml.safe_load(next(p for p in written if p.name.endswith("-secrets.yaml")).read_text())
    assert set(secret["stringData"].values()) == {"<redacted: secret config inferry:s3AccessKey>",
                                                  "<redacted: secret config inferry:s3SecretKey>"}
    gateway = yaml.safe_load(next(p for p in written if "-secret-" in p.name and "-gateway-" in p.name).read_text())
    assert "Bearer <redacted: secret config inferry:apiKey>" in gateway["stringData"]["caddy.json"]
