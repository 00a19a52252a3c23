"""SGLang on a real OpenSSH test host (process runtime): its own command line (`python3 -m sglang.launch_server`),
the API key only in a private file (never on a command line), chat with the key, 401 without."""
from __future__ import annotations

import openai
import pytest

from tests.support import ssh_direct as ssh_apply
from tests.support.ssh_env import API_KEY, apply, deployment, plan_for, secrets, weights_store  # noqa: F401
from tests.targets.ssh.test_ssh_apply import chat


@pytest.fixture(scope="module")
def served(host_network, weights_store):
    (h,) = host_network.add_hosts(["sgl0"])
    d = deployment([h], weights_store, engine={"kind": "sglang"})
    out = apply(d, [h], weights_store)
    yield h, out
    ssh_apply.destroy(plan_for(d), secrets([h], weights_store))
    host_network.remove_host(h)


def test_sglang_serves_with_the_key_and_keeps_it_off_every_command_line(served):
    h, out = served
    (endpoint,) = out.endpoints
    assert chat(endpoint)
    with pytest.raises(openai.AuthenticationError):
        chat(endpoint, key="wrong-key")
    (start,) = h.engine_starts()
    assert start["argv"][0] == "sglang.launch_server" and "--config" in start["argv"], start  # the key's file
    assert "--api-key" not in start["argv"]
    assert API_KEY not in h.exec("cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' '").stdout
