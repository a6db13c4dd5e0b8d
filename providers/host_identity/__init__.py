"""The stack's SSH host CA and its host-key root, as Pulumi dynamic resources."""

from .provider import SshHostCaProvider, SshHostKeyProvider, SshHostKeyRootProvider
from .resource import DEFAULT_VALID_DAYS, SshHostCa, SshHostCaArgs, SshHostKeyRoot

__all__ = [
    "DEFAULT_VALID_DAYS",
    "SshHostCa",
    "SshHostCaArgs",
    "SshHostCaProvider",
    "SshHostKeyProvider",
    "SshHostKeyRoot",
    "SshHostKeyRootProvider",
]
