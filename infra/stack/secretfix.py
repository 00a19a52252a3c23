"""How a user stores a secret: the whole command (stack, `inferry:` key, value on stdin) and the line to write."""
from __future__ import annotations

from typing import Final


class SecretField:
    """Every secret of a stack by its field path: the one spelling of each. Plain str values, not an Enum: they
    key dicts that reach Pulumi inputs, provider props and YAML, which must see exactly the str."""

    API_KEY: Final = "serving.api_key"
    PREVIOUS_API_KEY: Final = "serving.previous_api_key"
    GATEWAY_CERT_KEY: Final = "target.gateway.certificate_key"
    GATEWAY_EAB_HMAC: Final = "target.gateway.acme.eab_hmac_key"
    S3_ACCESS: Final = "storage.access_key_id"
    S3_SECRET: Final = "storage.secret_access_key"
    S3_READ_ACCESS: Final = "storage.read_access_key_id"
    S3_READ_SECRET: Final = "storage.read_secret_access_key"
    PRIVATE_KEY: Final = "target.private_key"
    HF_TOKEN: Final = "model.hf_token"


# The config key each secret field is stored under by convention (the README, the bundled examples).
CONFIG_KEYS = {SecretField.API_KEY: "apiKey", SecretField.S3_ACCESS: "s3AccessKey",
               SecretField.S3_SECRET: "s3SecretKey", SecretField.PRIVATE_KEY: "sshPrivateKey",
               SecretField.HF_TOKEN: "hfToken", SecretField.S3_READ_ACCESS: "s3ReadAccessKey",
               SecretField.S3_READ_SECRET: "s3ReadSecretKey", SecretField.PREVIOUS_API_KEY: "previousApiKey",
               SecretField.GATEWAY_CERT_KEY: "tlsKey", SecretField.GATEWAY_EAB_HMAC: "acmeEabHmacKey"}
# The reference a component's private key holds (infra/component/prepare.py): the key is a value from another
# resource, which no reference can give back to a later delete, replacement or refresh.
KEY_STAND_IN: Final = "INFERRY_SSH_PRIVATE_KEY"
# Stands for the stack's name in a hint made before the name is known; the loaders put the name in.
STACK = "STACK"


def set_secret(stack: str, key: str) -> str:
    """The fix that stores a secret: typed at the prompt or piped, never on the command line (shell history)."""
    if key == "sshPrivateKey":
        how = f"`pulumi config set --secret --stack {stack} inferry:{key} < ~/.ssh/id_ed25519` (the key file)"
    else:
        how = f"`pulumi config set --secret --stack {stack} inferry:{key}` and type the value (or pipe it in)"
    return f"in the project folder run {how} (a new stack first needs `pulumi stack init {stack}`)"


def reference_line(field: str, key: str) -> str:
    """The stack-file line that refers to the stored secret."""
    return f"`{field.rsplit('.', 1)[-1]}: {{config: {key}}}` under {field.rsplit('.', 1)[0]}"


def plain_text_fix(field: str, stack: str = STACK) -> str:
    """A secret written in the stack file: the line to write instead, and how to store the value."""
    key = CONFIG_KEYS.get(field, "KEY")
    return f"write {reference_line(field, key)}, then {set_secret(stack, key)}; or use {{env: VAR}}"
