"""The SSH target on real OpenSSH test hosts: first apply, no-op re-apply, a changed option, the load balancer."""
from __future__ import annotations

import hashlib
import urllib.error
import urllib.request

import openai
import pytest

from tests.support.ssh_env import API_KEY, FILES, MODEL, apply, deployment, ops_log, plan_for, secrets, weights_store  # noqa: F401
from tests.support import ssh_direct as ssh_apply


def chat(endpoint: str, key: str = API_KEY) -> str:
    """One chat completion through the openai client."""
    client = openai.OpenAI(base_url=endpoint, api_key=key, max_retries=0, timeout=10)
    r = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hello"}], max_tokens=8)
    return r.choices[0].message.content


def cached_weights(host) -> dict[str, str]:
    """{file: sha256} of the model folder in the host's weights cache."""
    out = host.exec("cd /var/lib/inferry/weights/llama-3.1-8b-instruct && sha256sum *").stdout
    return {ln.split()[1]: ln.split()[0] for ln in out.splitlines()}


@pytest.fixture(scope="module")
def fleet(host_network, weights_store):
    """Two replicas without a gateway (each checks the key itself; the gateway's own tests are in
    test_ssh_gateway.py), applied once for the module's tests."""
    hosts = [host_network.add_host(f"rep{i}") for i in range(2)]
    d = deployment(hosts, weights_store)
    first = apply(d, hosts, weights_store)
    yield hosts, d, first, weights_store
    ssh_apply.destroy(plan_for(d), secrets(hosts, weights_store))
    for h in hosts:
        host_network.remove_host(h)


def test_first_apply_serves_every_host_with_the_key(fleet):
    hosts, d, first, _ = fleet
    assert first.endpoints == [f"http://{h.address}:8000/v1" for h in hosts]
    assert first.endpoint == first.endpoints[0]
    for ep in first.endpoints + [first.endpoint]:
        assert chat(ep)
        with pytest.raises(openai.AuthenticationError):
            chat(ep, key="wrong-key")
        with pytest.raises(urllib.error.HTTPError) as no_key:
            urllib.request.urlopen(f"{ep}/models", timeout=10)
        assert no_key.value.code == 401
    for h in hosts:  # weights fetched and verified, env file private, one restart
        assert cached_weights(h) == {rel: hashlib.sha256(data).hexdigest() for rel, data in FILES.items()}
        assert h.exec("stat -c %a /etc/inferry/inferry.env").stdout == "600\n"
        assert API_KEY not in h.exec("cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' '").stdout
        assert sum(1 for ln in ops_log(h) if ln.endswith(" restart")) == 1
    assert first.count("restarts") == 2 and first.count("writes") > 10  # one per engine; no gateway here


PRIVACY = {"VLLM_NO_USAGE_STATS": "1", "VLLM_DO_NOT_TRACK": "1", "DO_NOT_TRACK": "1", "HF_HUB_DISABLE_TELEMETRY": "1",
           "HF_HUB_OFFLINE": "1"}
# Each `vllm serve` process's environment, blocks after '@@' (the shell running this skips itself).
ENGINE_ENVIRON = ("for p in /proc/[0-9]*; do [ $p = /proc/$$ ] && continue; "
                  "tr '\\0' ' ' < $p/cmdline 2>/dev/null | grep -q 'vllm serve' && "
                  "{ echo @@; tr '\\0' '\\n' < $p/environ; }; done; true")


def test_the_running_engine_sends_nothing_out(fleet):
    # Read from the engine process itself (/proc/PID/environ), not from the rendered files.
    hosts = fleet[0]
    for h in hosts:
        out = h.exec(ENGINE_ENVIRON).stdout
        engines = [dict(ln.split("=", 1) for ln in block.splitlines() if "=" in ln) for block in out.split("@@\n")[1:]]
        assert engines, f"no vllm serve process on {h.name}"
        for env in engines:
            assert {k: env.get(k) for k in PRIVACY} == PRIVACY
            # its caches go where destroy removes them, not into root's ~/.cache or /tmp
            cache = f"{fleet[1].target.service_dir}/cache"
            assert (env["XDG_CACHE_HOME"], env["TRITON_CACHE_DIR"]) == (cache, f"{cache}/triton"), env


def test_second_apply_changes_nothing(fleet):
    hosts, d, _, store = fleet
    before = [ops_log(h) for h in hosts]
    mtimes = [managed_mtimes(h) for h in hosts]
    assert all("/etc/inferry/run-engine.sh" in m for m in mtimes)
    again = apply(d, hosts, store)
    assert (again.count("writes"), again.count("restarts")) == (0, 0)
    assert [ops_log(h) for h in hosts] == before
    assert [managed_mtimes(h) for h in hosts] == mtimes


def managed_mtimes(host) -> str:
    """Modification times of every file inferry manages on the host (not the engine's own log)."""
    return host.exec("find /etc/inferry /var/lib/inferry -type f ! -name '*.log*' -printf '%p %T@\\n' | sort").stdout


def test_changed_engine_option_restarts_only_the_engine(fleet):
    hosts, d, _, store = fleet
    changed = deployment(hosts, store, engine={"max_num_seqs": 64})
    res = apply(changed, hosts, store)
    for h in res.hosts:
        assert h.outputs["service"]["changed"] == ["/etc/inferry/run-engine.sh"]
        assert h.outputs["service"]["restarts"] == 1
        assert h.outputs["weights"]["writes"] == 0 and h.outputs["weights"]["fetched"] == 0
    assert "--max-num-seqs 64" in hosts[1].exec("cat /etc/inferry/run-engine.sh").stdout
    assert chat(res.endpoint)


def test_a_sudo_user_instead_of_root(make_hosts, weights_store):
    (h,) = make_hosts(1)
    h.exec("useradd -m -s /bin/sh -p '*' ubuntu && echo 'ubuntu ALL=(ALL) NOPASSWD:ALL' > /etc/sudoers.d/ubuntu", check=True)
    d = deployment([h], weights_store, user="ubuntu")
    first = apply(d, [h], weights_store)
    assert chat(first.endpoint)
    assert h.exec("stat -c '%U %a' /etc/inferry/inferry.env").stdout == "root 600\n"
    assert h.exec("ls /tmp | grep -c inferry").stdout.strip() == "0"  # staged uploads are removed
    assert apply(d, [h], weights_store).count("writes") == 0


def test_every_file_is_private_from_its_first_byte(make_hosts, weights_store):
    (h,) = make_hosts(1)
    # Files are written by `cat > TMP` under umask 077: a `cat` first on the host's PATH records the mode of its
    # output file the moment it runs, before a byte is written, then hands over to the real cat.
    h.install("cat", 'o=$(readlink /proc/$$/fd/1); case "$o" in /*) stat -c "%a $o" "$o" >> /tmp/created ;; esac; '
                     'exec /usr/bin/cat "$@"')
    apply(deployment([h], weights_store), [h], weights_store)
    created = h.exec("/usr/bin/cat /tmp/created").stdout.splitlines()
    env = [line for line in created if "/etc/inferry/inferry.env.inferry-" in line]
    assert len(env) == 1 and len(created) >= 4, created
    assert all(line.startswith("600 ") for line in created), created
    modes = h.exec("stat -c '%a %n' /etc/inferry/inferry.env /etc/inferry/run-engine.sh").stdout.split()
    assert modes == ["600", "/etc/inferry/inferry.env", "755", "/etc/inferry/run-engine.sh"]


def test_a_shard_comes_in_byte_ranges_through_the_hosts_own_shell_curl_and_dd(make_hosts, weights_store, monkeypatch):
    """An apply with ranges of 1 MiB (64 MiB and up in use, too large for the suite's models): the 2 MiB shard comes in
    two ranges, run by the host's dash, curl and dd, and lands whole. A curl first on the host's PATH logs its
    arguments (the URL comes on stdin, never in them)."""
    from infra.targets.ssh import weights

    monkeypatch.setattr(weights, "RANGE_MIN", 1 << 20)
    (h,) = make_hosts(1)
    h.install("curl", 'echo "$*" >> /tmp/curl-args; exec /usr/bin/curl "$@"')
    apply(deployment([h], weights_store), [h], weights_store)
    ranges = sorted(a.split(" -r ")[1].split()[0] for a in h.exec("/usr/bin/cat /tmp/curl-args").stdout.splitlines()
                    if " -r " in a)
    assert ranges == ["0-1048575", "1048576-2097151"], ranges  # the 2 MiB shard only; the rest one request each
    assert cached_weights(h) == {rel: hashlib.sha256(data).hexdigest() for rel, data in FILES.items()}
    assert h.exec("readlink -f /bin/sh").stdout.strip().endswith("dash")


def test_partial_files_a_killed_fetch_left_are_removed_by_the_next_apply(make_hosts, weights_store):
    """A fetch killed on the host leaves `.part.PID.K` files; the next apply removes them before its disk check
    (what they held counts as free), except those of a fetch whose pid still runs on the host."""
    (h,) = make_hosts(1)
    d = deployment([h], weights_store)
    apply(d, [h], weights_store)
    folder = "/var/lib/inferry/weights/llama-3.1-8b-instruct"
    shard = next(rel for rel, data in FILES.items() if len(data) > 1 << 20)
    gone = h.exec("sh -c 'echo $$'").stdout.strip()
    live = h.exec("sleep 600 >/dev/null 2>&1 & echo $!").stdout.strip()
    h.exec(f"cd {folder} && head -c 300000 /dev/zero > {shard}.part.{gone}.0 && : > {shard}.part.{gone}.0.1048576 "
           f"&& : > {shard}.part.{live}.2")
    apply(d, [h], weights_store)
    left = h.exec(f"cd {folder} && ls -a").stdout.split()
    assert [n for n in left if ".part." in n] == [f"{shard}.part.{live}.2"], left
    h.exec(f"kill {live}; rm {folder}/{shard}.part.{live}.2")
    assert cached_weights(h) == {rel: hashlib.sha256(data).hexdigest() for rel, data in FILES.items()}


def test_a_model_file_whose_name_holds_part_is_counted_as_the_models(make_hosts, weights_store, tmp_path):
    """fetch.sh's partial files are REL.part.PID.K; a model file such as `weights.part.1.bin` is the model's own: a
    second apply changes nothing and the cache shows no drift (it was skipped before, so every apply fetched)."""
    from infra.storage.settings import StoreSettings
    from infra.storage.sync import push
    from infra.targets.ssh.weights import weights_drift
    from tests.support.ssh_env import BUCKET, parse_deployment, raw_deployment

    store = weights_store
    odd = {**FILES, "weights.part.1.bin": b"part one" * 1000, "sub/weights.part.2.bin": b"part two" * 1000}
    folder = tmp_path / "odd-model"
    for rel, data in odd.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_bytes(data)
    push(StoreSettings(store.endpoint, store.region, BUCKET, store.access_key, store.secret_key), folder, "odd-names",
         show=False)
    (h,) = make_hosts(1)
    raw = raw_deployment([h], weights_store)
    raw["model"]["weights"] = f"s3://{BUCKET}/odd-names"
    d = parse_deployment(raw, "test stack")
    first = apply(d, [h], weights_store)
    w = first.hosts[0].outputs["weights"]
    assert (w["files"], w["bytes"]) == (len(odd), sum(map(len, odd.values()))), w
    before = ops_log(h)
    again = apply(d, [h], weights_store)
    assert again.count("writes") == 0 and ops_log(h) == before
    (hp,) = plan_for(d).hosts
    key = h.client_key_text

    def drift() -> list[str]:  # called here, so that a failed assert shows the drift, not the key
        return weights_drift(hp.weights[0], key, w["manifest_sha256"], w["files"], w["bytes"])

    assert (found := drift()) == [], found
    h.exec(f"rm {hp.weights[0].model_dir}/sub/weights.part.2.bin")
    assert (found := drift()) and "holds 5 files" in found[0], found
