"""The stack's SSH host CA and the instances' host keys and certificates, as Pulumi dynamic resources."""

from .provider import SshHostCaProvider, SshHostKeyProvider
from .resource import DEFAULT_VALID_DAYS, SshHostCa, SshHostCaArgs, SshHostKey, SshHostKeyArgs

__all__ = [
    "DEFAULT_VALID_DAYS",
    "SshHostCa",
    "SshHostCaArgs",
    "SshHostCaProvider",
    "SshHostKey",
    "SshHostKeyArgs",
    "SshHostKeyProvider",
]
