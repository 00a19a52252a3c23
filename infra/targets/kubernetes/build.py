"""The TensorRT engine-build Job: fetch weights, build on a GPU of the serving kind, upload to the build cache."""
from __future__ import annotations

import shlex
from typing import Any

from infra.targets.kubernetes import weights
from infra.targets.kubernetes.expansion import literal_containers
from infra.targets.kubernetes.pod import confined
from infra.targets.kubernetes.context import SCRIPTS_DIR, Ctx
from infra.targets.kubernetes.names import short_hash

MARKER = ".inferry-build-complete"  # written last by the upload: a complete engine in the build cache


def build_job_name(ctx: Ctx) -> str:
    """The build Job's name changes with the cache key: a new build is a new Job (Jobs are immutable)."""
    return f"{ctx.name}-build-{short_hash(ctx.spec.build.cache_key)}"


def _build_container(ctx: Ctx, env: list[dict[str, Any]]) -> dict[str, Any]:
    b = ctx.spec.build
    marker = shlex.quote(f"{b.output_dir}/{MARKER}")
    # A complete engine fetched from the build cache (another stack built it) is not built again.
    skip = f'if [ -f {marker} ]; then echo "engine: complete in the build cache; not rebuilding"; exit 0; fi\n'
    gpus = str(ctx.spec.gpus)
    return {
        "name": "build-engine", "image": b.image, "command": ["sh", "-c", skip + b.script],
        **({"env": env} if env else {}),
        "volumeMounts": weights.weight_mounts(ctx, read_only=False) + [{"name": "shm", "mountPath": "/dev/shm"}],
        "resources": {"limits": {"nvidia.com/gpu": gpus},
                      "requests": {"nvidia.com/gpu": gpus, "cpu": ctx.t.cpu, "memory": ctx.t.memory}},
    }


def _upload_container(ctx: Ctx) -> dict[str, Any]:
    return {
        "name": "upload-engine", "image": ctx.t.fetch_image,
        "command": ["sh", f"{SCRIPTS_DIR}/{weights.UPLOAD_SCRIPT}"],
        "env": [{"name": "BUCKET", "value": ctx.d.storage.bucket},
                {"name": "BUILD_PREFIX", "value": weights.build_prefix(ctx)},
                {"name": "BUILD_DIR", "value": ctx.spec.build.output_dir}] + weights.s3_env(ctx, push=True),
        "volumeMounts": [m for m in weights.weight_mounts(ctx, read_only=False) if m["name"] == "engine-build"]
        + [weights.scripts_mount()],
        "resources": {"requests": {"cpu": "1", "memory": "512Mi"}},
    }


def build_job_spec(ctx: Ctx, pod_common: dict[str, Any], env: list[dict[str, Any]]) -> dict[str, Any]:
    """Job pod: init fetch (weights and any cached engine), verify, build; then the upload container."""
    # Its own weights folder (a pvc may be bound elsewhere), but the node's cache where the stack keeps one.
    own = weights.weights_volumes(ctx) if weights.node_cached(ctx) else [
        {"name": "weights", "emptyDir": {"sizeLimit": ctx.t.cache_size}}]
    volumes = own + [{"name": "engine-build", "emptyDir": {}}] + [v for v in pod_common["volumes"]
                                                            if v["name"] in ("config", "shm")]
    init = [weights.fetch_container(ctx), weights.verify_container(ctx), _build_container(ctx, env)]
    pod = {**{k: v for k, v in pod_common.items() if k != "volumes"}, "restartPolicy": "Never",
           "initContainers": init, "containers": [_upload_container(ctx)], "volumes": volumes}
    # No ttlSecondsAfterFinished: Pulumi tracks the Job; a vanished Job would be rebuilt on the next up.
    return {"backoffLimit": 1, "template": {"metadata": {"labels": ctx.labels("engine-build")},
                                            "spec": literal_containers(confined(pod))}}
