"""The engine's service spec as plain data, secrets as references: what `inferry render --json` prints."""
from __future__ import annotations

from typing import Any

from infra.engines.spec import ServiceSpec


def service_json(spec: ServiceSpec) -> dict[str, Any]:
    """The service spec as plain data, secrets as references (never values)."""
    env = {e.name: e.value if e.secret is None else {"secret": e.secret_field, "from": e.secret.describe()}
           for e in spec.env}
    return {"engine": spec.engine, "version": spec.version, "image": spec.image, "command": list(spec.command),
            "args": list(spec.args), "env": env, "port": spec.port, "engine_port": spec.listen_port,
            "health_path": spec.health_path, "gpus": spec.gpus, "served_model_name": spec.served_model_name,
            "model_dir": spec.model_dir, "streams_weights": spec.streams_weights,
            "needs_auth_proxy": spec.needs_auth_proxy,
            "files": [{"name": f.name, "mount_path": f.mount_path} for f in spec.files],
            "build": None if spec.build is None else {"image": spec.build.image, "cache_key": spec.build.cache_key,
                                                       "output_dir": spec.build.output_dir}}
