"""What the engine or GPU cannot run, found at `inferry validate` time. Rules are pure functions over numbers;
`engine_checks` feeds them the deployment plus GPU/model facts (the catalog, or model.architecture)."""
from __future__ import annotations

from infra.engines import options
from infra.engines.spec import ServiceSpec
from infra.errors import Problem


def fp8_rule(weight_only: bool, fp8_compute: bool, fp8_kv: bool, capability: float) -> list[Problem]:
    """FP8 needs compute capability 8.9+ (Ada, Hopper); an engine with weight_only (vLLM) falls back to
    weight-only FP8 below that."""
    if not (fp8_compute or fp8_kv) or capability >= 8.9:
        return []
    path = "engine.quantization" if fp8_compute else "engine.kv_cache_dtype"
    if weight_only and fp8_compute:
        # vLLM 0.33 model_executor/layers/quantization/fp8.py: Fp8Config.get_min_capability() is 75, and
        # "For GPUs that lack FP8 hardware support, we can leverage the Marlin kernel for fast weight-only
        # FP8 quantization" (docs: features/quantization/fp8, W8A16 on Ampere).
        if capability < 7.5:
            return [Problem(path, f"FP8 needs compute capability 7.5 or newer in vLLM (GPU has {capability})",
                            hint="use a newer GPU or drop quantization: fp8")]
        return [Problem(path, f"GPU compute capability {capability} has no FP8 tensor cores: vLLM runs FP8 "
                              "weight-only (Marlin), activations stay 16-bit", severity="warning",
                        hint="expect less speed-up than on Ada/Hopper (8.9+)")]
    # TensorRT-LLM support matrix: FP8 (weights and KV cache) on Ada, Hopper and Blackwell (SM 89+) only.
    return [Problem(path, f"FP8 needs compute capability 8.9 or newer (GPU has {capability})",
                    hint="choose an Ada/Hopper/Blackwell GPU or leave FP8 off")]


def tp_rule(tp: int, heads: int, kv_heads: int) -> list[Problem]:
    """Tensor parallelism splits attention heads: TP must divide them (KV heads: divide, or be divided)."""
    problems = []
    # vLLM config/model.py verify_with_parallel_config: "Total number of attention heads (H) must be
    # divisible by tensor parallel size (TP)."
    if heads % tp:
        problems.append(Problem("engine.tensor_parallel_size", f"{tp} does not divide the model's {heads} "
                                "attention heads", hint=_divisors(heads)))
    # vLLM models/llama.py: kv_heads >= TP partitions KV heads (kv_heads % TP == 0), else replicates them
    # (TP % kv_heads == 0).
    elif (kv_heads >= tp and kv_heads % tp) or (kv_heads < tp and tp % kv_heads):
        problems.append(Problem("engine.tensor_parallel_size", f"{tp} neither divides nor is a multiple of "
                                f"the model's {kv_heads} KV heads", hint=_divisors(kv_heads)))
    return problems


def _divisors(n: int) -> str:
    return "use one of " + ", ".join(str(i) for i in range(1, min(n, 64) + 1) if n % i == 0)


def context_rule(max_model_len: int | None, max_context: int) -> list[Problem]:
    """max_model_len above the model's context is refused (vLLM config/model.py _get_and_verify_max_len)."""
    if max_model_len is None or max_model_len <= max_context:
        return []
    return [Problem("engine.max_model_len", f"exceeds the model's maximum context of {max_context} tokens",
                    str(max_model_len), hint=f"set it to {max_context} or less")]


def snapshot_problems(spec: ServiceSpec) -> list[Problem]:
    """A warning when the pinned version has no option snapshot (the option checks are then skipped)."""
    try:
        options.snapshot(spec.engine, spec.version)
    except options.OptionError as e:
        return [Problem("engine.version", f"cannot check options: {e}", severity="warning",
                        hint="run scripts/snapshot_vllm.py or scripts/snapshot_trtllm.py for this version")]
    return []


def argv_problems(spec: ServiceSpec, path: str) -> list[Problem]:
    """Every flag of the rendered command line (extra args included) that the pinned version refuses."""
    return [Problem(path, f"{spec.engine} {spec.version} refuses the command line: {msg}")
            for msg in options.check_args(spec.engine, spec.version, spec.args)]
