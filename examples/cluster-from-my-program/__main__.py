"""Serve a model on a Kubernetes cluster that this program creates with another provider's resource (docs/component.md)."""
import pulumi

from inferry import Deployment, DeploymentArgs
from my_cloud import GpuCluster  # your cloud's cluster (pulumi_eks.Cluster, ...); here tests/support/cloud's stand-in

config = pulumi.Config()
cluster = GpuCluster("gpus")  # its kubeconfig (a secret Output) has one context, named after it
pool = config.get("gpuPool") or "my-cloud/gpu-pool"  # the GPU node pool's label, and the key of its taint
llm = Deployment("llm", DeploymentArgs(
    model={"name": "llama-3.1-8b-instruct", "weights": "llama-3.1-8b-instruct"},
    engine={"kind": "vllm", "max_model_len": 4096},
    target={"kind": "kubernetes", "kubeconfig": cluster.kubeconfig, "context": "gpus", "namespace": "llm",
            "replicas": 1, "node_selector": {pool: "true"},
            "tolerations": [{"key": pool, "operator": "Equal", "value": "true", "effect": "NoSchedule"}],
            "cpu": config.get("cpu") or "8", "memory": config.get("memory") or "64Gi", "startup_timeout_s": 300},
    storage={"endpoint": config.require("weightsEndpoint"), "region": config.get("weightsRegion") or "us-east-1",
             "bucket": config.require("weightsBucket"), "access_key_id": config.require_secret("s3AccessKey"),
             "secret_access_key": config.require_secret("s3SecretKey")},
    provider={"name": "my-cloud", "region": "eu-test", "gpu": "H100-80GB", "price_per_gpu_hour": 3.0},
    serving={"api_key": config.require_secret("apiKey")},
))
pulumi.export("endpoint", llm.endpoint)
pulumi.export("cost_per_million_tokens", llm.cpm_usd)
