"""An instance's issued host identity, the same for both routings.

`issue_host_identity` derives the instance's host key and certificate from the stack's host-key root and CA
(`ssh_gateway.core.derived_identity`: the same bytes on every run, so nothing per instance is kept in state)
and, for an instance behind a Service, registers the `ssh-<instance>-host-key` Secret its pod mounts them
from. `SshInstance` and `ConnectSshInstance` both call it, so an instance keeps its key whichever routing it has.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from ssh_gateway.core.derived_identity import DerivedIdentity, derive_identity
from ssh_gateway.core.host_identity import secret_files
from ssh_gateway.core.names import Role, child_name, host_key_secret_name
from ssh_gateway.core.targets import ServiceSpec
from ssh_gateway.core.trust import plain_line

from .kubernetes_objects import ownership_annotations

__all__ = ["HostIdentityArgs", "Signing", "issue_host_identity"]


@dataclass(frozen=True, kw_only=True)
class Signing:
    """What every instance's identity of one stack is derived from (one per run)."""

    root: pulumi.Input[str]
    """The stack's host-key root (`SshHostKeyRoot.private_key`, a secret): the keys are derived from it."""
    ca_seed: pulumi.Input[str]
    """The signing CA's private key as its 32-byte seed in base64 (a secret)."""
    now: int
    """The time of this run (Unix seconds), which picks the certificates' validity window."""


@dataclass(frozen=True, kw_only=True)
class HostIdentityArgs:
    """The instance's issued host identity: what its certificate says, and the stack secrets it comes from."""

    principals: Sequence[str]
    """Every name a client checks the certificate against (never a port)."""
    signing: Signing
    """The stack's root and signing CA."""
    valid_days: int
    """How long a certificate is valid; certificates move to the next window with a third of it left."""
    generation: int
    """The host key's generation: bumping it rotates the key."""
    key_id: str
    """The certificate's key id, shown in sshd's log and `ssh -v`."""
    secret: bool
    """Deliver the files in a Kubernetes Secret next to the Service; else they are returned for the stack output
    `hostIdentities` (static targets, rendered manifests)."""


def issue_host_identity(
    parent: pulumi.Resource,
    name: str,
    instance: str,
    identity: HostIdentityArgs,
    lookup: str,
    service: ServiceSpec | None,
) -> tuple[pulumi.Output[str], pulumi.Output[dict[str, str] | None]]:
    """The instance's key and certificate, derived from the stack's secrets (no resource of its own) and, for an
    instance behind a Service (`service`), the Secret the pod mounts them from.

    Returns the plain known_hosts line (under `lookup`) of the key, and the files when no Secret delivers them.
    What the key is derived from names neither the port, the Service, the target nor the routing, so none of
    them ever changes it.
    """
    principals = tuple(identity.principals)

    def derive(secrets: list[str]) -> DerivedIdentity:
        root, ca_seed = secrets
        return derive_identity(
            root=root,
            ca_seed=ca_seed,
            instance=instance,
            generation=identity.generation,
            principals=principals,
            key_id=identity.key_id,
            valid_days=identity.valid_days,
            now=identity.signing.now,
        )

    derived = pulumi.Output.all(identity.signing.root, identity.signing.ca_seed).apply(derive)
    # The public key is public: unsecret it, or every output it reaches (hostKeys) would be hidden too.
    line = pulumi.Output.unsecret(derived.apply(lambda d: plain_line(lookup, d.public_key)))
    if identity.secret and service is not None:
        files = derived.apply(
            lambda d: secret_files(private_key=d.private_key, public_key=d.public_key, certificate=d.certificate)
        )
        _create_secret(name, instance, service, files, pulumi.ResourceOptions(parent=parent))
        return line, pulumi.Output.from_input(None)
    issued = derived.apply(
        lambda d: {"privateKey": d.private_key, "publicKey": d.public_key, "certificate": d.certificate}
    )
    return line, pulumi.Output.secret(issued)


def _create_secret(
    name: str, instance: str, spec: ServiceSpec, files: pulumi.Output[dict[str, str]], child: pulumi.ResourceOptions
) -> None:
    # pulumi-kubernetes keeps a Secret's data secret in state; marked anyway, as it holds a private key.
    data: pulumi.Output[dict[str, str]] = pulumi.Output.secret(files)
    # Next to the Service, named after it; the pod mounts it at MOUNT_DIR (docs/host-identity.md).
    k8s.core.v1.Secret(
        child_name(name, Role.HOST_KEY_SECRET),
        metadata=k8s.meta.v1.ObjectMetaArgs(
            name=host_key_secret_name(instance),
            namespace=spec.namespace,
            labels={"app.kubernetes.io/managed-by": "ssh-gateway", "ssh-gateway/instance": instance},
            annotations=ownership_annotations(skip_await=spec.skip_await),
        ),
        type="Opaque",
        string_data=data,
        opts=child,
    )
