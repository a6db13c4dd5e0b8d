"""`SshHostCa` and `SshHostKey`: the stack's SSH host CA and one host key with its certificate per instance.

Type tokens `HOST_CA_TYPE` and `HOST_KEY_TYPE` of `ssh_gateway.core.names`.
Private keys are outputs the engine encrypts in state (`additional_secret_outputs`), and the CA's private key
reaches a host key as a secret input whatever the caller passes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Final

import pulumi
import pulumi.dynamic

from providers.pickling import unwrap_batch_setitems
from ssh_gateway.core.host_identity import private_seed
from ssh_gateway.core.names import HOST_CA_KIND, HOST_IDENTITY_MODULE, HOST_KEY_KIND

from .models import SECRET_OUTPUTS
from .provider import SshHostCaProvider, SshHostKeyProvider

__all__ = ["DEFAULT_VALID_DAYS", "SshHostCa", "SshHostCaArgs", "SshHostKey", "SshHostKeyArgs"]

DEFAULT_VALID_DAYS: Final = 365
"""A year; the certificate is re-issued by the first `up` after two thirds of it (see `renewal_due`)."""


@dataclass(frozen=True, kw_only=True)
class SshHostCaArgs:
    """What a host CA is made from."""

    generation: pulumi.Input[int] = 1
    """Bump to draw a new CA key (the resource is replaced; every certificate is re-issued by the new one)."""


@dataclass(frozen=True, kw_only=True)
class SshHostKeyArgs:
    """What one instance's host key and certificate are made from."""

    principals: pulumi.Input[Sequence[pulumi.Input[str]]]
    """Every name a client checks the certificate against: the public host, the ssh alias, the CONNECT
    authority. Order and case do not matter; a change re-issues the certificate, the key stays."""
    ca_private_key: pulumi.Input[str]
    """The signing CA's private key file (`SshHostCa.private_key`); the input keeps only its seed, always a
    secret."""
    ca_public_key: pulumi.Input[str]
    """The signing CA's public key (`SshHostCa.public_key`); a change re-issues the certificate."""
    valid_days: pulumi.Input[int] = DEFAULT_VALID_DAYS
    """How long a certificate is valid, 1 to 3650 days; a change re-issues it."""
    generation: pulumi.Input[int] = 1
    """Bump to draw a new host key (the resource is replaced): the documented way to rotate one instance."""
    key_id: pulumi.Input[str] | None = None
    """The certificate's key id, shown in sshd's log and `ssh -v`; default: the resource's name."""


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


class SshHostKey(_CamelCaseProperties, pulumi.dynamic.Resource, module=HOST_IDENTITY_MODULE, name=HOST_KEY_KIND):
    """An instance's Ed25519 host key (generated once per `generation`) and its host certificate."""

    _attributes: ClassVar[dict[str, str]] = {
        "principals": "principals",
        "validDays": "valid_days",
        "keyId": "key_id",
        "caPublicKey": "ca_public_key",
        "caPrivateKey": "ca_private_key",
        "generation": "generation",
        "certificate": "certificate",
        "serial": "serial",
        "validAfter": "valid_after",
        "validBefore": "valid_before",
        "caFingerprint": "ca_fingerprint",
        "publicKey": "public_key",
        "privateKey": "private_key",
        "fingerprint": "fingerprint",
    }

    principals: pulumi.Output[list[str]]
    """The certificate's principals, sorted and lowercased."""
    valid_days: pulumi.Output[int]
    key_id: pulumi.Output[str]
    ca_public_key: pulumi.Output[str]
    generation: pulumi.Output[int]
    certificate: pulumi.Output[str]
    """`ssh-ed25519-cert-v01@openssh.com AAAA...`: the `ssh_host_ed25519_key-cert.pub` file."""
    serial: pulumi.Output[int]
    valid_after: pulumi.Output[int]
    """Unix seconds."""
    valid_before: pulumi.Output[int]
    """Unix seconds."""
    ca_fingerprint: pulumi.Output[str]
    """`SHA256:...` of the CA that signed the certificate."""
    public_key: pulumi.Output[str]
    """`ssh-ed25519 AAAA...`: the `ssh_host_ed25519_key.pub` file, and what a plain known_hosts line pins."""
    private_key: pulumi.Output[str]
    """The `ssh_host_ed25519_key` file; a secret."""
    fingerprint: pulumi.Output[str]
    """`SHA256:...` of the host key (also the resource's id): the same for as long as the key lives."""

    def __init__(self, name: str, args: SshHostKeyArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        props: dict[str, Any] = {
            "principals": args.principals,
            "valid_days": args.valid_days,
            "key_id": args.key_id if args.key_id is not None else name,
            "ca_public_key": args.ca_public_key,
            # Secret even when the caller passes a plain string: inputs are stored in state too. Only the seed:
            # every host key's inputs hold it and every checkpoint rewrites them.
            "ca_private_key": pulumi.Output.secret(
                pulumi.Output.from_input(args.ca_private_key).apply(lambda key: private_seed(key, name="caPrivateKey"))
            ),
            "generation": args.generation,
            # Outputs only: None here so that the engine resolves them onto the attributes.
            **dict.fromkeys(("certificate", "serial", "valid_after", "valid_before", "ca_fingerprint")),
            **dict.fromkeys(("public_key", "private_key", "fingerprint")),
        }
        unwrap_batch_setitems()
        super().__init__(SshHostKeyProvider(), name, props, _with_secret_outputs(opts))
