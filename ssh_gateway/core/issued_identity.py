"""What an instance's issued host identity says, from the stack's settings: one answer for the program, which
derives every identity at each run, and for `ssh-gateway host-identity`, which derives one on demand.

Both must give the same certificate for the same settings (the same principals, key id, key generation and
validity), so the two read these fields from here and from nowhere else.
"""

from __future__ import annotations

from dataclasses import dataclass

from .names import pangolin_resource_name
from .settings import ConnectModeInstance, HostIdentityOn, Instance, Settings
from .trust import connect_principals, principals

__all__ = ["IssuedIdentity", "issued_identity"]


@dataclass(frozen=True)
class IssuedIdentity:
    """The fields of an instance's issued key and certificate that the settings decide."""

    principals: tuple[str, ...]
    """Every name a client checks the certificate against (never a port)."""
    key_id: str
    """The certificate's key id: the instance's Pangolin resource name, whatever its routing."""
    generation: int
    """The host key's generation (`hostKeyGeneration`)."""
    valid_days: int
    """`hostIdentity.validDays`."""
    signer: int
    """The generation of the CA that signs (`hostIdentity.ca.signer`)."""


def issued_identity(settings: Settings, inst: Instance, *, project: str, stack: str) -> IssuedIdentity | None:
    """The instance's issued identity, or None when the stack issues it none (host identity off, a pinned
    `hostKey`)."""
    identity = settings.host_identity
    if not isinstance(identity, HostIdentityOn) or not settings.issues_host_key(inst):
        return None
    if isinstance(inst, ConnectModeInstance):
        names = connect_principals(settings.connect_instance(inst).authority, inst.name)
    else:
        names = principals(settings.gateway.host_template, inst.name)
    return IssuedIdentity(
        principals=names,
        key_id=pangolin_resource_name(project, stack, inst.name),
        generation=inst.host_key_generation,
        valid_days=identity.valid_days,
        signer=identity.ca.signer,
    )
