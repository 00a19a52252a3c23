"""`pytest -m MARKER` selects the tests that drive that real system (tests/support/markers.py), no fewer, no more."""
from __future__ import annotations

import re
import subprocess
import sys
from functools import cache

from tests.conftest import ROOT

OFFLINE = "tests/engines/test_engines_vllm_startup.py::test_typed_fields_name_real_engine_fields"


@cache
def selected(marker: str) -> frozenset[str]:
    """The test ids `pytest --collect-only -m MARKER` selects (collection only: nothing starts)."""
    r = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-m",
                        marker], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    return frozenset(line for line in r.stdout.splitlines() if "::" in line)


def modules(ids) -> set[str]:
    """The test modules of these ids."""
    return {i.split("::")[0] for i in ids}


def source_modules(pattern: str) -> set[str]:
    """Test modules whose source matches pattern (this one aside: it names them all)."""
    found = {str(p.relative_to(ROOT)) for p in (ROOT / "tests").rglob("test_*.py")
             if re.search(pattern, p.read_text())}
    return found - {"tests/support/test_markers.py"}


def test_real_engine_selects_the_real_engine_tests_and_not_a_name_alike():
    ids = selected("real_engine")
    assert OFFLINE not in ids  # `-k real_engine` picked this one by its name
    assert {"tests/targets/ssh/test_real_engine_ssh.py::test_up_streams_progress_and_serves_with_the_key_only",
            "tests/targets/ssh/test_real_engine_docker.py::test_status_shows_a_crash_docker_recovered_from",
            "tests/lifecycle/test_real_engine_migrate.py::test_migrate_through_the_real_engine_without_downtime",
            "tests/targets/kubernetes/test_cluster_kubernetes.py::test_second_up_changes_nothing",
            "tests/lifecycle/test_eventstack.py::test_a_stack_the_backend_lacks_is_created_by_the_first_command",
            } <= ids
    # precise within a module: its offline tests stay out
    assert "tests/lifecycle/test_eventstack.py::test_secrets_anywhere_in_a_value_stay_masked" not in ids
    assert not modules(ids) & {"tests/lifecycle/test_lifecycle_automation.py", "tests/cli/test_one_gate.py"}


def test_every_module_that_starts_a_real_system_carries_its_marker():
    assert source_modules(r"tests\.support\.realengine") <= modules(selected("real_engine"))
    assert source_modules(r"add_hosts?\([^)]*docker=True") <= modules(selected("docker"))
    assert "tests/targets/ssh/test_ssh_docker.py" in modules(selected("docker"))


def test_fixtures_mark_what_they_start():
    assert "tests/targets/kubernetes/test_cluster_kubernetes.py" in modules(selected("cluster"))
    ssh = selected("ssh_hosts")
    assert "tests/targets/ssh/test_real_engine_ssh.py::test_outputs_are_the_stacks" in ssh  # through a fixture
    assert "tests/support/test_s3_server.py" in modules(selected("s3"))
    assert OFFLINE not in ssh | selected("s3") | selected("docker") | selected("cluster")
