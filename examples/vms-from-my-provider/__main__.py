"""Serve a model on a GPU VM that this program creates with another provider's resource (docs/component.md)."""
import pulumi

from inferry import Deployment, DeploymentArgs
from my_cloud import GpuVm  # the VM resource of your cloud's provider; here tests/support/cloud's stand-in

config = pulumi.Config()
vm = GpuVm("gpu-1", host_index=config.get_int("hostIndex") or 0)  # another index: another machine
llm = Deployment("llm", DeploymentArgs(
    model={"name": "llama-3.1-8b-instruct", "weights": "llama-3.1-8b-instruct"},
    engine={"kind": "vllm", "max_model_len": 4096},
    target={"kind": "ssh", "runtime": "process", "health_timeout_s": 30, "private_key": vm.private_key,
            "hosts": [{"address": vm.address, "name": "gpu-1", "user": vm.user, "host_key": vm.host_key}]},
    storage={"endpoint": config.require("weightsEndpoint"), "region": config.get("weightsRegion") or "us-east-1",
             "bucket": config.require("weightsBucket"), "access_key_id": config.require_secret("s3AccessKey"),
             "secret_access_key": config.require_secret("s3SecretKey")},
    provider={"name": "my-cloud", "region": "eu-test", "gpu": "H200", "price_per_gpu_hour": 3.0},
    serving={"api_key": config.require_secret("apiKey")},
))
pulumi.export("endpoint", llm.endpoint)
pulumi.export("address", vm.address)
pulumi.export("cost_per_million_tokens", llm.cpm_usd)
