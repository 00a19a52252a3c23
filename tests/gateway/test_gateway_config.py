"""The gateway's stack section and the Caddy config computed from it: what is refused, what reaches Caddy."""
from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from infra.gateway.caddy import GatewayPlan, GatewaySecrets, caddy_config
from infra.gateway.config import Acme, Gateway
from infra.stack.stackfile import load_stack, parse_deployment
from infra.errors import ConfigError


@pytest.mark.parametrize("fields,needle", [
    ({"domains": []}, "tls: acme needs domains"),
    ({"domains": ["*.example.com"]}, "is not a DNS name"),
    ({"domains": ["a.example.com", "a.example.com"]}, "each name once"),
    ({"domains": ["a.example.com"], "tls": "certificate"}, "needs certificate"),
    ({"tls": "off", "certificate": "/x.pem"}, "only with tls: certificate"),
    ({"domains": ["a.example.com"], "https_port": 80}, "must differ"),
])
def test_the_section_refuses_what_cannot_serve(fields, needle):
    with pytest.raises(ValidationError) as e:
        Gateway(**fields)
    assert needle in str(e.value)


@pytest.mark.parametrize("field,value", [("email", "{env.HOME}@example.com"),
                                         ("directory", "https://ca.example/{file./etc/shadow}"),
                                         ("directory", "http://ca.example/directory")])
def test_values_caddy_would_read_as_placeholders_or_plain_http_are_refused(field, value):
    with pytest.raises(ValidationError):
        Acme(**{field: value})


def test_an_eab_key_id_needs_its_hmac_key():
    with pytest.raises(ValidationError) as e:
        Acme(eab_key_id="kid")
    assert "eab_hmac_key" in str(e.value)


def _raw(**target):
    d = load_stack("eu-ssh").deployment.model_dump(exclude_none=True, by_alias=True)
    d["target"] = {**d["target"], **target}
    d["target"].pop("gateway", None) if "load_balancer" in target else None
    return d


def test_the_old_load_balancer_is_refused_with_lines_that_work():
    with pytest.raises(ConfigError) as e:
        parse_deployment(_raw(load_balancer={"host": "gpu-mad-1", "port": 8080}), "stack")
    text = e.value.render()
    assert "load_balancer is now gateway" in text and "gateway: {host: H, tls: off, http_port: PORT}" in text
    fixed = parse_deployment(_raw(gateway={"host": "gpu-mad-1", "tls": "off", "http_port": 8080}), "stack")
    assert fixed.target.gateway.port == 8080  # the printed fix, applied, validates


def test_keys_and_secrets_reach_caddy_unchanged_and_only_where_they_belong():
    p = GatewayPlan("/etc/inferry/gateway", ("127.0.0.1:8000",), ("/v1/models",), "/health", "certificate",
                    certificate="-----BEGIN CERTIFICATE-----\nX\n-----END CERTIFICATE-----\n")
    key = "sk-a/b+c=d~e.f_g-0123456789abcdef"
    conf = caddy_config(p, GatewaySecrets((key,), "-----BEGIN PRIVATE KEY-----\nK\n"))
    server = conf["apps"]["http"]["servers"]["gateway"]
    assert server["routes"][1]["match"] == [{"path": ["/v1/models"], "header": {"Authorization": [f"Bearer {key}"]}}]
    assert conf["apps"]["tls"]["certificates"]["load_pem"][0]["key"] == "-----BEGIN PRIVATE KEY-----\nK\n"
    assert conf["admin"]["listen"] == "unix//etc/inferry/gateway/admin.sock|0600"
    assert conf["admin"]["config"] == {"persist": False}
    text = json.dumps(conf)
    assert text.count(key) == 1  # in the matcher only: never in a log setting, a header or a body


def test_every_number_reaches_caddy_as_an_integer_after_pulumi_turned_it_into_a_float():
    """Pulumi hands a provider's numbers back as floats; Caddy's config wants integers (roll_keep_days: 30)."""
    from infra.targets.ssh.args import gateway_args, props_of
    from infra.targets.ssh.gateway import GatewayArgs
    from infra.targets.ssh.session import Conn

    plan = GatewayPlan("/srv/g", ("10.0.0.2:8000",), ("/v1/models",), "/health", "off", access_log_days=7)
    props = props_of(GatewayArgs(Conn("10.0.0.1", 22, "root"), plan, "m"))
    props["plan"] = {k: float(v) if isinstance(v, int) else v for k, v in props["plan"].items()}
    text = json.dumps(caddy_config(gateway_args(props).plan, GatewaySecrets(("k" * 40,))))
    assert ".0," not in text and ".0}" not in text and '"roll_keep_days": 7' in text
