"""`SshHostCa` and `SshHostKeyRoot`: the stack's SSH host CA (per generation) and its host-key root.

Type tokens `HOST_CA_TYPE` and `HOST_KEY_ROOT_TYPE` of `ssh_gateway.core.names`. Private keys are outputs the
engine encrypts in state (`additional_secret_outputs`). The instances' keys and certificates are derived from
the two (`ssh_gateway.core.derived_identity`): no resource per instance.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Final

import pulumi
import pulumi.dynamic

from providers.sdk_patches import unwrap_batch_setitems
from ssh_gateway.core.names import HOST_CA_KIND, HOST_IDENTITY_MODULE, HOST_KEY_ROOT_KIND

from .models import SECRET_OUTPUTS
from .provider import SshHostCaProvider, SshHostKeyRootProvider

__all__ = ["DEFAULT_VALID_DAYS", "SshHostCa", "SshHostCaArgs", "SshHostKeyRoot"]

DEFAULT_VALID_DAYS: Final = 365
"""A year; the certificate is re-issued by the first `up` after two thirds of it (`certificate_validity` of
`ssh_gateway.core.derived_identity`)."""


@dataclass(frozen=True, kw_only=True)
class SshHostCaArgs:
    """What a host CA is made from."""

    generation: pulumi.Input[int] = 1
    """Bump to draw a new CA key (the resource is replaced; every certificate is re-issued by the new one)."""


class _CamelCaseProperties:
    """snake_case attributes for the camelCase property names the engine, state and diffs show."""

    _attributes: ClassVar[dict[str, str]]

    def translate_input_property(self, prop: str) -> str:
        """snake_case attribute -> camelCase property."""
        return {attribute: name for name, attribute in self._attributes.items()}.get(prop, prop)

    def translate_output_property(self, prop: str) -> str:
        """camelCase property -> snake_case attribute."""
        return self._attributes.get(prop, prop)


def _with_secret_outputs(opts: pulumi.ResourceOptions | None) -> pulumi.ResourceOptions:
    return pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(additional_secret_outputs=list(SECRET_OUTPUTS)))


class SshHostCa(_CamelCaseProperties, pulumi.dynamic.Resource, module=HOST_IDENTITY_MODULE, name=HOST_CA_KIND):
    """An Ed25519 SSH host CA, generated once (per `generation`) and kept only in state."""

    _attributes: ClassVar[dict[str, str]] = {
        "generation": "generation",
        "publicKey": "public_key",
        "privateKey": "private_key",
        "fingerprint": "fingerprint",
    }

    generation: pulumi.Output[int]
    public_key: pulumi.Output[str]
    """`ssh-ed25519 AAAA...`: what the `@cert-authority` line publishes."""
    private_key: pulumi.Output[str]
    """The CA's private key file; a secret."""
    fingerprint: pulumi.Output[str]
    """`SHA256:...` of the CA key (also the resource's id)."""

    def __init__(self, name: str, args: SshHostCaArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        # snake_case keys: the SDK makes them the attributes; `translate_input_property` names them for the engine.
        props: dict[str, Any] = {
            "generation": args.generation,
            **dict.fromkeys(("public_key", "private_key", "fingerprint")),
        }
        unwrap_batch_setitems()
        super().__init__(SshHostCaProvider(), name, props, _with_secret_outputs(opts))


class SshHostKeyRoot(
    _CamelCaseProperties, pulumi.dynamic.Resource, module=HOST_IDENTITY_MODULE, name=HOST_KEY_ROOT_KIND
):
    """The stack's host-key root: a 32-byte secret drawn once (per `generation`), kept only in state, from which
    every instance's host key is derived (`ssh_gateway.core.derived_identity`)."""

    _attributes: ClassVar[dict[str, str]] = {"generation": "generation", "privateKey": "private_key"}

    generation: pulumi.Output[int]
    private_key: pulumi.Output[str]
    """The root, 32 bytes in base64; a secret."""

    def __init__(self, name: str, args: SshHostCaArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        props: dict[str, Any] = {"generation": args.generation, "private_key": None}
        unwrap_batch_setitems()
        super().__init__(SshHostKeyRootProvider(), name, props, _with_secret_outputs(opts))
