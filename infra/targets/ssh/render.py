"""The files an SSH host gets to run the engine: compose file or launcher, env file, auth proxy, engine files.

Templates hold no flag logic: they lay out a ServiceSpec. Every value passes a quoting filter for the
format it lands in (infra/render/quoting.py). Secret values reach only `render_env` / `render_secret_files`,
called by the target at apply time with resolved values, never through Pulumi outputs.
"""
from __future__ import annotations

import posixpath
import re
from typing import Any

from infra.stack.secretfix import SecretField
from infra.render import quoting
from infra.render.templates import RenderedFile, render_template
from infra.stack.config import Deployment
from infra.targets.ssh.config import SshTarget
from infra.engines.spec import MODELS_DIR, PROXY_IMAGE, ServiceSpec
from infra.errors import SecretError
from infra.stack.secrets import checked_api_key

COMPOSE, ENV, LAUNCHER = "compose.yaml", "inferry.env", "run-engine.sh"
PROXY, BUILD = "auth-proxy.conf", "build-engine.sh"
PROJECT = "inferry"  # docker compose project name
ENGINES_HOST_DIR = "/var/lib/inferry/engines"  # built TensorRT engines on an SSH host
CACHE = "cache"  # a bare process's caches, in its service folder (own_caches)
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _deployment(stack_or_deployment: Any) -> Deployment:
    return stack_or_deployment if isinstance(stack_or_deployment, Deployment) else stack_or_deployment.deployment


def ssh_spec(stack_or_deployment: Any, runtime: str | None = None) -> ServiceSpec:
    """The ServiceSpec as an SSH host runs it: container paths under docker, host paths for a bare process."""
    from infra.engines import service_spec

    d = _deployment(stack_or_deployment)
    t = d.target
    assert isinstance(t, SshTarget)
    if (runtime or t.runtime) == "docker":
        return service_spec(d)  # its caches are in the container's own layer, removed with it
    return own_caches(service_spec(d, models_dir=t.weights_cache, config_dir=t.service_dir), t.service_dir)


def own_caches(spec: ServiceSpec, service_dir: str) -> ServiceSpec:
    """A bare process keeps its caches (the hub's, vLLM's compile cache, Triton's and Inductor's kernels) in its
    service folder, which destroy removes: in root's ~/.cache or /tmp they would outlive the deployment on a
    rented machine."""
    from dataclasses import replace

    from infra.engines.spec import EnvVar

    cache = posixpath.join(service_dir, CACHE)
    env = (EnvVar("XDG_CACHE_HOME", cache), EnvVar("TRITON_CACHE_DIR", posixpath.join(cache, "triton")),
           EnvVar("TORCHINDUCTOR_CACHE_DIR", posixpath.join(cache, "inductor")))
    return replace(spec, env=spec.env + env)


def behind_gateway(spec: ServiceSpec, bind: str, runtime: str) -> ServiceSpec:
    """The engine as it runs behind the gateway: no client key (the gateway checks keys and removes them, so no
    engine logs one), listening on BIND only (a bare process is told so; a container's port is published there)."""
    from dataclasses import replace

    env = tuple(e for e in spec.env if e.secret_field != SecretField.API_KEY)
    args = list(spec.args)
    if runtime == "process" and "--host" in args:
        args[args.index("--host") + 1] = bind
    return replace(spec, env=env, args=tuple(args), bind=bind)


def _volumes(t: SshTarget, spec: ServiceSpec) -> list[str]:
    # The config refuses ':' in weights_cache and service_dir: compose's short volume syntax splits on it.
    vols = [f"{t.weights_cache}:{MODELS_DIR}:ro"]
    vols += [f"{posixpath.join(t.service_dir, f.name)}:{f.mount_path}:ro" for f in spec.files]
    if spec.build is not None:
        vols.append(f"{ENGINES_HOST_DIR}:{posixpath.dirname(spec.build.output_dir)}:ro")
    return vols


def render_ssh_files(stack_or_deployment: Any, spec: ServiceSpec | None = None,
                     runtime: str | None = None, bind: str = "") -> list[RenderedFile]:
    """Every non-secret file an SSH host needs: the compose file (docker) or the launcher (process), engine
    files; BIND: the one address a container's port is published on ("" every address)."""
    d = _deployment(stack_or_deployment)
    t = d.target
    assert isinstance(t, SshTarget)
    runtime = runtime or t.runtime
    spec = spec or ssh_spec(d, runtime)
    env_file = posixpath.join(t.service_dir, ENV)
    files = [RenderedFile(f.name, f.content, f.mode) for f in spec.files]
    if runtime == "docker":
        compose = render_template(
            "compose.yaml.j2", spec=spec, model=d.model.name, project=PROJECT, env_file=env_file,
            port_mapping=f"{bind + ':' if bind else ''}{spec.port}:{spec.listen_port}", volumes=_volumes(t, spec), proxy_image=PROXY_IMAGE,
            proxy_volume=f"{posixpath.join(t.service_dir, PROXY)}:/etc/nginx/conf.d/default.conf:ro")
        files.append(RenderedFile(COMPOSE, compose))
    else:
        files.append(RenderedFile(LAUNCHER, render_template("run-engine.sh.j2", spec=spec, env_file=env_file), 0o755))
    if spec.build is not None:
        files.append(RenderedFile(BUILD, "#!/bin/sh\n# Rendered by inferry: builds the TensorRT engine "
                                         f"{spec.build.cache_key} inside {spec.build.image}.\n" + spec.build.script, 0o755))
    return sorted(files, key=lambda f: f.name)


def render_env(spec: ServiceSpec, secret_values: dict[str, str]) -> RenderedFile:
    """The env file (mode 0600) from the spec's env; secret_values maps a secret's stack field to its value."""
    lines = []
    for e in spec.env:
        if not _ENV_NAME.fullmatch(e.name):
            raise ValueError(f"bad environment variable name {e.name!r}")
        if e.secret is not None:
            if e.secret_field not in secret_values:
                raise SecretError(f"no value for {e.secret_field} ({e.secret.describe()})",
                                  "resolve every secret of ServiceSpec.secret_env() before rendering", where=e.name)
            value = secret_values[e.secret_field]
        else:
            value = e.value or ""
        lines.append((e.name, quoting.env_value(e.name, value)))
    return RenderedFile(ENV, render_template("inferry.env.j2", env=lines), 0o600)


def render_secret_files(spec: ServiceSpec, secret_values: dict[str, str]) -> list[RenderedFile]:
    """Files that carry secret values (0600): the env file, and the auth-proxy config when the engine needs one."""
    if SecretField.API_KEY in secret_values:
        checked_api_key(secret_values[SecretField.API_KEY])
    files = [render_env(spec, secret_values)]
    if spec.needs_auth_proxy:
        if SecretField.API_KEY not in secret_values:
            raise SecretError("no value for serving.api_key", "resolve it before rendering", where=PROXY)
        # Behind the gateway the proxy only puts the engine (bound to 127.0.0.1) on the host's one address: the
        # gateway checks keys and removes them from the requests it forwards.
        listen = f"{spec.bind}:{spec.port}" if spec.bind else str(spec.port)
        conf = render_template("auth-proxy.conf.j2", listen=listen, engine_port=spec.listen_port,
                               health_path=quoting.nginx_token("health path", spec.health_path),
                               api_key="" if spec.bind else secret_values[SecretField.API_KEY])
        files.append(RenderedFile(PROXY, conf, 0o600))
    return files


def redacted_values(spec: ServiceSpec) -> dict[str, str]:
    """Stand-in secret values for previews (`inferry render`): names the field, never the value."""
    fields = {e.secret_field for e in spec.env if e.secret_field} | ({SecretField.API_KEY} if spec.needs_auth_proxy else set())
    return {f: "REDACTED-" + re.sub(r"[^A-Za-z0-9]", "-", f) for f in fields}
