"""Contradictions between sections of a valid stack file (each section alone is fine)."""
from __future__ import annotations

from infra.stack.config import Deployment
from infra.errors import Problem
from infra.stack.problems import did_you_mean
from infra.stack.regions import KNOWN_REGIONS, in_eu


def check_bucket(d: Deployment) -> list[Problem]:
    """An old-style s3://BUCKET/PREFIX location must name this stack's own bucket."""
    bucket, prefix = d.model.legacy_bucket, d.model.weights_prefix
    if bucket is None or bucket == d.storage.bucket:
        return []
    return [Problem("model.weights", f"names bucket {bucket!r} but storage.bucket is {d.storage.bucket!r}",
                    repr(d.model.weights),
                    hint=f"write `weights: {prefix}`: model.weights is the key prefix inside each stack's own "
                    "storage.bucket, so model stays identical across stacks whose buckets differ")]


def check_residency(d: Deployment) -> list[Problem]:
    """With residency eu, the provider and the store must both be in EU regions."""
    if d.policy.residency != "eu":
        return []
    problems = []
    for path, region in (("provider.region", d.provider.region), ("storage.region", d.storage.region)):
        verdict = in_eu(region, d.policy.allowed_regions)
        if verdict is False:
            problems.append(Problem(path, "outside the EU but policy.residency is 'eu'", repr(region),
                                    hint="choose an EU region or drop the residency policy"))
        elif verdict is None:
            guess, listed = did_you_mean(region, KNOWN_REGIONS), "if it is an EU region, list it in policy.allowed_regions"
            problems.append(Problem(path, "unknown region: inferry cannot tell whether it is in the EU", repr(region),
                                    hint=f"{guess} (or, {listed})" if guess else listed))
    return problems


def check_gpu_count(d: Deployment) -> list[Problem]:
    """One engine instance needs TP x PP GPUs on one host or pod."""
    need = d.engine.gpus
    if need <= d.provider.gpu_count:
        return []
    return [Problem("engine.tensor_parallel_size",
                    f"needs {need} GPUs (tensor x pipeline parallel) but provider.gpu_count is "
                    f"{d.provider.gpu_count} per host/replica",
                    hint=f"set provider.gpu_count to {need} or lower the parallelism")]


def check_weight_delivery(d: Deployment) -> list[Problem]:
    """Streaming from S3 needs the weights in S3 and an engine that streams."""
    streams = d.engine.streams_weights
    problems = []
    if streams and not d.model.in_store:
        problems.append(Problem("engine.load_format", "runai_streamer streams from the weight store",
                                hint="set model.weights to the model's key prefix in storage.bucket "
                                "or use load_format auto"))
    wants = d.target.streams_weights
    if wants is not None and wants != streams:
        problems.append(Problem("target.weights_delivery",
                                "'stream' goes with a vLLM engine whose load_format is runai_streamer",
                                repr(getattr(d.target, "weights_delivery", None)), hint="make the two agree"))
    return problems


CHECKS = [check_bucket, check_residency, check_gpu_count, check_weight_delivery]


def cross_checks(d: Deployment) -> list[Problem]:
    """Every contradiction between sections."""
    return [p for check in CHECKS for p in check(d)]
