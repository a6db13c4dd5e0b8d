"""An instance's issued host identity, the same for both routings.

`issue_host_identity` derives the instance's host key from the stack's host-key root
(`ssh_gateway.core.derived_identity`: the same bytes on every run, so nothing per instance is kept in state)
and, for an instance behind a Service, its certificate from the stack's CA and the `ssh-<instance>-host-key`
Secret its pod mounts both from. An instance no Secret serves (a static target, rendered manifests) gets its
files from `ssh-gateway host-identity` (ssh_gateway/ops/tools/host_identity_files.py), which derives the same bytes
on demand: kept in no output, they cost no state. `SshInstance` and `ConnectSshInstance` both call it, so an
instance keeps its key whichever routing it has.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from ssh_gateway.core.derived_identity import DerivedIdentity, derive_identity, derived_host_key
from ssh_gateway.core.host_identity import secret_files
from ssh_gateway.core.issued_identity import IssuedIdentity
from ssh_gateway.core.names import INSTANCE_LABEL, MANAGED_BY, MANAGED_BY_LABEL, Role, child_name, host_key_secret_name
from ssh_gateway.core.targets import IN_PLACE_ANNOTATIONS
from ssh_gateway.core.trust import plain_line

from .kubernetes_objects import ownership_annotations

__all__ = ["HostIdentityArgs", "SecretPlace", "Signing", "issue_host_identity"]


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

    issued: IssuedIdentity
    """The principals, key id, key generation and validity (`ssh_gateway.core.issued_identity`)."""
    signing: Signing
    """The stack's root and signing CA."""
    secret: SecretPlace | None
    """Where the files are delivered in a Kubernetes Secret (next to the instance's Service, or for a static target
    in its `namespace`); None: only the public key is derived here (static targets, rendered manifests: the
    operator derives the files with `ssh-gateway host-identity`)."""


@dataclass(frozen=True, kw_only=True)
class SecretPlace:
    """Where an instance's host-key Secret goes."""

    namespace: str


def issue_host_identity(
    parent: pulumi.Resource, name: str, instance: str, identity: HostIdentityArgs, lookup: str
) -> pulumi.Output[str]:
    """The plain known_hosts line (under `lookup`) of the instance's key, derived from the stack's root (no
    resource of its own); with `identity.secret`, also the Secret its pod mounts the key and certificate from.

    What the key is derived from names neither the port, the Service, the target nor the routing, so none of
    them ever changes it.
    """
    issued = identity.issued
    place = identity.secret
    if place is None:
        # No Secret to fill: the public key is all the stack publishes (hostKeys); no certificate is signed.
        public = pulumi.Output.from_input(identity.signing.root).apply(
            lambda root: derived_host_key(root, instance, issued.generation).public_key
        )
        return pulumi.Output.unsecret(public.apply(lambda key: plain_line(lookup, key)))

    def derive(secrets: list[str]) -> DerivedIdentity:
        root, ca_seed = secrets
        return derive_identity(
            root=root,
            ca_seed=ca_seed,
            instance=instance,
            generation=issued.generation,
            principals=issued.principals,
            key_id=issued.key_id,
            valid_days=issued.valid_days,
            now=identity.signing.now,
        )

    derived = pulumi.Output.all(identity.signing.root, identity.signing.ca_seed).apply(derive)
    files = derived.apply(
        lambda d: secret_files(private_key=d.private_key, public_key=d.public_key, certificate=d.certificate)
    )
    _create_secret(name, instance, place, files, pulumi.ResourceOptions(parent=parent))
    # The public key is public: unsecret it, or every output it reaches (hostKeys) would be hidden too.
    return pulumi.Output.unsecret(derived.apply(lambda d: plain_line(lookup, d.public_key)))


def _create_secret(
    name: str, instance: str, place: SecretPlace, files: pulumi.Output[dict[str, str]], child: pulumi.ResourceOptions
) -> None:
    # pulumi-kubernetes keeps a Secret's data secret in state; marked anyway, as it holds a private key.
    data: pulumi.Output[dict[str, str]] = pulumi.Output.secret(files)
    # In the instance's namespace, named after its Service; the pod mounts it at MOUNT_DIR (docs/host-identity.md).
    k8s.core.v1.Secret(
        child_name(name, Role.HOST_KEY_SECRET),
        metadata=k8s.meta.v1.ObjectMetaArgs(
            name=host_key_secret_name(instance),
            namespace=place.namespace,
            labels={MANAGED_BY_LABEL: MANAGED_BY, INSTANCE_LABEL: instance},
            annotations={**ownership_annotations(), **IN_PLACE_ANNOTATIONS},
        ),
        type="Opaque",
        string_data=data,
        opts=child,
    )
