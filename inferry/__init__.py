"""inferry's public Python API: serve a model from your own Pulumi program (docs/component.md).

    from inferry import Deployment, DeploymentArgs

Only re-exports: the implementation is infra.component (one code path with the stack-file program).
"""
from infra.component.args import DeploymentArgs, ModelArgs, ServingArgs, StorageArgs, TargetArgs
from infra.component.deployment import Deployment
from infra.errors import ConfigError, InferryError
from infra.stack.config import EngineBase, PolicyConfig, ProviderConfig, TrtllmEngine, VllmEngine
from infra.targets.kubernetes.config import KubernetesTargetArgs
from infra.gateway.config import GatewayArgs
from infra.targets.ssh.config import SshHostArgs, SshTargetArgs

__all__ = [
    "ConfigError", "Deployment", "DeploymentArgs", "EngineBase", "GatewayArgs", "InferryError", "KubernetesTargetArgs",
    "ModelArgs", "PolicyConfig", "ProviderConfig", "ServingArgs", "SshHostArgs",
    "SshTargetArgs", "StorageArgs", "TargetArgs", "TrtllmEngine", "VllmEngine",
]
