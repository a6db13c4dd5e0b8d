"""An instance's issued host identity as children of its component, the same for both routings.

`issue_host_identity` registers the instance's host key with its certificate (`SshHostKey`) and, for an instance
behind a Service, the `ssh-<instance>-host-key` Secret its pod mounts them from. `SshInstance` and
`ConnectSshInstance` both call it, so an instance keeps its key whichever routing it has.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from providers.host_identity import SshHostKey, SshHostKeyArgs
from ssh_gateway.core.host_identity import secret_data
from ssh_gateway.core.names import Role, child_name, host_key_secret_name
from ssh_gateway.core.targets import ServiceSpec
from ssh_gateway.core.trust import plain_line

from .kubernetes_objects import ownership_annotations

__all__ = ["HostIdentityArgs", "issue_host_identity"]


@dataclass(frozen=True, kw_only=True)
class HostIdentityArgs:
    """The instance's issued host identity: what its certificate says, and who signs it."""

    principals: Sequence[str]
    """Every name a client checks the certificate against (never a port)."""
    ca_public_key: pulumi.Input[str]
    """The signing CA's public key."""
    ca_private_key: pulumi.Input[str]
    """The signing CA's private key (a secret)."""
    valid_days: int
    """How long a certificate is valid; the first `up` after two thirds of it re-issues it."""
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
    """The issued key and certificate and, for an instance behind a Service (`service`), the Secret the pod
    mounts them from.

    Returns the plain known_hosts line (under `lookup`) of the issued key, and the files when no Secret
    delivers them. The key's name and inputs depend on neither the port, the Service, the target nor the
    routing, so none of them ever changes it.
    """
    child = pulumi.ResourceOptions(parent=parent)
    key = SshHostKey(
        child_name(name, Role.HOST_KEY),
        SshHostKeyArgs(
            principals=list(identity.principals),
            ca_private_key=identity.ca_private_key,
            ca_public_key=identity.ca_public_key,
            valid_days=identity.valid_days,
            generation=identity.generation,
            key_id=identity.key_id,
        ),
        child,
    )
    line = key.public_key.apply(lambda public: plain_line(lookup, public))
    parts = pulumi.Output.all(key.private_key, key.public_key, key.certificate)
    if identity.secret and service is not None:
        files = parts.apply(lambda p: secret_data(private_key=p[0], public_key=p[1], certificate=p[2]))
        _create_secret(name, instance, service, files, child)
        return line, pulumi.Output.from_input(None)
    issued = parts.apply(lambda p: {"privateKey": p[0], "publicKey": p[1], "certificate": p[2]})
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
