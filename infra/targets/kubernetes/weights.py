"""Weight delivery on Kubernetes: init containers that fetch and verify, and the TensorRT engine-build Job."""
from __future__ import annotations

from typing import Any

from infra.stack.location import WeightsLocation
from infra.stack.secretfix import SecretField
from infra.engines.spec import MODELS_DIR, ServiceSpec
from infra.stack.config import Deployment
from infra.stack.resources import bundled
from infra.storage.manifest import MANIFEST_NAME
from infra.targets.kubernetes.context import SCRIPTS_DIR, Ctx
from infra.targets.kubernetes.names import GPU_PRODUCT_LABEL, quantity_bytes

TEMPLATES = bundled("templates") / "kubernetes"
FETCH_SCRIPT = "fetch-weights.sh"
VERIFY_SCRIPT = "verify-weights.py"
UPLOAD_SCRIPT = "upload-engine.sh"
STORE_SCRIPT = "store.sh"  # the copy commands both of the others source (s5cmd, else the aws CLI)
# Where a node's weights cache (weights_delivery: node-cache) is mounted in the pod. The model folder the engine
# reads is then a link into it, made by the fetch and checked by the verify init container.
CACHE_DIR = "/var/cache/inferry-weights"


def scripts(with_upload: bool = False) -> dict[str, str]:
    """The helper scripts shipped in the ConfigMap, by file name (the upload one only for engine builds)."""
    names = (FETCH_SCRIPT, STORE_SCRIPT, VERIFY_SCRIPT) + ((UPLOAD_SCRIPT,) if with_upload else ())
    return {n: (TEMPLATES / n).read_text(encoding="utf-8") for n in names}


def build_prefix(ctx: Ctx) -> str | None:
    """The store prefix of the built TensorRT engine, when the spec has a build step."""
    return spec_build_prefix(ctx.d.storage.bucket, ctx.spec)


def spec_build_prefix(bucket: str, spec: ServiceSpec) -> str | None:
    """The built engine's prefix in `bucket` for a spec with a build step, else None."""
    if spec.build is None:
        return None
    key = WeightsLocation(bucket, "").key_under(spec.build.cache_key)
    return (spec.build.cache_key if key is None else key).strip("/")


def store_prefixes(d: Deployment, spec: ServiceSpec) -> list[str]:
    """Every key prefix the pod's init containers fetch: the model, each extra weights set, the built engine."""
    sources = [src for src, _, _ in spec_weight_sets(d, spec)]
    prefixes = [loc.prefix for loc in map(WeightsLocation.parse, sources) if loc is not None]
    return prefixes + [p for p in [spec_build_prefix(d.storage.bucket, spec)] if p is not None]


def s3_env(ctx: Ctx, push: bool = False) -> list[dict[str, Any]]:
    """The store's environment for s5cmd or the aws CLI; keys come from the Secret. Only what pushes (the built engine's
    upload) gets the keys that write; fetching takes the read-only pair when the stack names one."""
    s = ctx.d.storage
    access, secret = (SecretField.S3_ACCESS, SecretField.S3_SECRET) if push else s.serving_key_fields
    return [
        {"name": "AWS_ENDPOINT_URL", "value": s.endpoint},
        {"name": "AWS_DEFAULT_REGION", "value": s.region},
        {"name": "AWS_REGION", "value": s.region},  # what s5cmd (the AWS SDK for Go) reads
        {"name": "ADDRESSING_STYLE", "value": s.addressing_style},
        {"name": "HOME", "value": "/tmp"},  # the scripts write ~/.aws/config (addressing style)
        ctx.secret_ref("AWS_ACCESS_KEY_ID", access),
        ctx.secret_ref("AWS_SECRET_ACCESS_KEY", secret),
    ]


def weights_root(ctx: Ctx) -> str:
    """Where the weights volume is mounted: MODELS_DIR when the model folder is below it (room for drafts)."""
    return MODELS_DIR if ctx.spec.model_dir.startswith(MODELS_DIR + "/") else ctx.spec.model_dir


def node_cached(ctx: Ctx) -> bool:
    """True when weights stay on the node between pods (weights_delivery: node-cache)."""
    return ctx.t.weights_delivery == "node-cache"


def weight_mounts(ctx: Ctx, read_only: bool) -> list[dict[str, Any]]:
    """Mounts of the weights (and the node's cache, and the built engine) volumes."""
    mounts = [{"name": "weights", "mountPath": weights_root(ctx), "readOnly": read_only}]
    if node_cached(ctx):
        mounts.append({"name": "node-cache", "mountPath": CACHE_DIR, "readOnly": read_only})
    if ctx.spec.build is not None:
        mounts.append({"name": "engine-build", "mountPath": ctx.spec.build.output_dir, "readOnly": read_only})
    return mounts


def scripts_mount() -> dict[str, Any]:
    """The ConfigMap's scripts, read-only."""
    return {"name": "config", "mountPath": SCRIPTS_DIR, "readOnly": True}


def spec_weight_sets(d: Deployment, spec: ServiceSpec) -> list[tuple[str, str, str]]:
    """(s3:// source, folder, container suffix) of the model and each extra weights set (drafts, adapters): what the
    init containers fetch, and what validate checks (it has no Ctx)."""
    sets = [(d.weights_uri, spec.model_dir, "weights")]
    return sets + [(src, path, f"extra-{i}") for i, (src, path) in enumerate(spec.extra_weights)]


def init_containers(ctx: Ctx) -> list[dict[str, Any]]:
    """Fetch then verify each weights set; the first fetch also brings the built TensorRT engine."""
    out = []
    for i, (source, folder, suffix) in enumerate(spec_weight_sets(ctx.d, ctx.spec)):
        out += [fetch_container(ctx, with_build=i == 0, source=source, folder=folder, suffix=suffix),
                verify_container(ctx, folder, suffix)]
    return out


def fetch_container(ctx: Ctx, with_build: bool = True, source: str | None = None, folder: str | None = None,
                    suffix: str = "weights") -> dict[str, Any]:
    """Init container: copy one weights set (and the built engine) from the store into the weights volume."""
    loc = WeightsLocation.parse(source or ctx.d.weights_uri) or WeightsLocation("", "")
    env = [{"name": "BUCKET", "value": loc.bucket}, {"name": "PREFIX", "value": loc.prefix},
           {"name": "WEIGHTS_DIR", "value": folder or ctx.spec.model_dir},
           {"name": "MANIFEST", "value": MANIFEST_NAME}]
    prefix = build_prefix(ctx) if with_build else None
    if prefix is not None:
        env += [{"name": "BUILD_PREFIX", "value": prefix},
                {"name": "BUILD_DIR", "value": ctx.spec.build.output_dir}]
    mounts = [m for m in weight_mounts(ctx, read_only=False) if prefix is not None or m["name"] != "engine-build"]
    return {
        "name": f"fetch-{suffix}", "image": ctx.t.fetch_image,
        "command": ["sh", f"{SCRIPTS_DIR}/{FETCH_SCRIPT}"],
        "env": env + cache_env(ctx) + s3_env(ctx),
        "volumeMounts": mounts + [scripts_mount()],
        "resources": init_requests(ctx, "512Mi"),
    }


def init_requests(ctx: Ctx, memory: str) -> dict[str, Any]:
    """An init container's requests: the engine's CPUs (they run before it, on the CPUs reserved for it), so that
    the pod never asks the scheduler for more than the engine does (its request is the larger of the two)."""
    return {"requests": {"cpu": ctx.t.cpu, "memory": memory}}


def verify_container(ctx: Ctx, folder: str | None = None, suffix: str = "weights") -> dict[str, Any]:
    """Init container: check sizes and sha256 against the manifest, in the engine image (it has python3)."""
    return {
        "name": f"verify-{suffix}", "image": ctx.spec.image,
        "command": ["python3", f"{SCRIPTS_DIR}/{VERIFY_SCRIPT}"],
        "env": [{"name": "WEIGHTS_DIR", "value": folder or ctx.spec.model_dir},
                {"name": "MANIFEST", "value": MANIFEST_NAME}] + cache_env(ctx),
        "volumeMounts": [m for m in weight_mounts(ctx, read_only=False) if m["name"] != "engine-build"]
        + [scripts_mount()],
        "resources": init_requests(ctx, "256Mi"),
    }


def cache_env(ctx: Ctx) -> list[dict[str, Any]]:
    """Where the node's cache is and how much it may keep (node-cache only)."""
    if not node_cached(ctx):
        return []
    return [{"name": "CACHE_DIR", "value": CACHE_DIR},
            {"name": "CACHE_BYTES", "value": str(quantity_bytes(ctx.t.cache_size))}]


def weights_volumes(ctx: Ctx) -> list[dict[str, Any]]:
    """The weights volume (node-local emptyDir, or the shared PVC cache); with node-cache, an emptyDir that holds
    only the links into the node's cache, and that cache's claim."""
    if ctx.t.weights_delivery == "pvc":
        return [{"name": "weights", "persistentVolumeClaim": {"claimName": pvc_name(ctx)}}]
    if node_cached(ctx):
        return [{"name": "weights", "emptyDir": {"sizeLimit": "1Mi"}},
                {"name": "node-cache", "persistentVolumeClaim": {"claimName": pvc_name(ctx)}}]
    return [{"name": "weights", "emptyDir": {"sizeLimit": ctx.t.cache_size}}]


def pvc_name(ctx: Ctx) -> str:
    """The PVC that caches weights across pod restarts."""
    return f"{ctx.name}-weights"


def pv_name(ctx: Ctx) -> str:
    """The node cache's PersistentVolume (cluster-wide, so the namespace is in its name)."""
    return f"{ctx.ns}.{ctx.name}.node-cache"


def pv_spec(ctx: Ctx) -> dict[str, Any]:
    """The node cache: a local volume at node_cache_path on every node the engine may run on, bound to this
    deployment's claim only. Each node keeps its own copy; Retain, because the cache is meant to outlive pods (and
    a local volume has nothing that could delete it)."""
    return {"capacity": {"storage": ctx.t.cache_size}, "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain", "storageClassName": "",
            "claimRef": {"namespace": ctx.ns, "name": pvc_name(ctx)},
            "local": {"path": ctx.t.node_cache_path},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": node_terms(ctx)}]}}}


def node_terms(ctx: Ctx) -> list[dict[str, Any]]:
    """The nodes the engine may run on, as a volume's node affinity: its node selector, else any Linux node."""
    labels = dict(ctx.t.node_selector)
    if ctx.t.gpu_product:
        labels[GPU_PRODUCT_LABEL] = ctx.t.gpu_product
    labels = labels or {"kubernetes.io/os": "linux"}
    return [{"key": k, "operator": "In", "values": [v]} for k, v in sorted(labels.items())]


def pvc_spec(ctx: Ctx) -> dict[str, Any]:
    """The cache PVC: ReadWriteMany when several replicas share it, else ReadWriteOnce; with node-cache, the claim
    on this deployment's local volume (each pod mounts its own node's folder)."""
    if node_cached(ctx):
        return {"accessModes": ["ReadWriteOnce"], "storageClassName": "", "volumeName": pv_name(ctx),
                "resources": {"requests": {"storage": ctx.t.cache_size}}}
    shared = ctx.t.replicas > 1 or ctx.t.autoscaling is not None
    spec: dict[str, Any] = {"accessModes": ["ReadWriteMany" if shared else "ReadWriteOnce"],
                            "resources": {"requests": {"storage": ctx.t.cache_size}}}
    if ctx.t.storage_class:
        spec["storageClassName"] = ctx.t.storage_class
    return spec
