"""The shared annotated types of config and API values: each checked in one place.

A port, a DNS label, a host, a generation, a login user, an SSH public key, an `{instance}` host template, a
Pangolin org id and an Azure resource name, as pydantic `Annotated` types whose errors name the value and what
is allowed. The settings model is built from them; they import nothing of ssh-gateway but `addresses`.
"""

from __future__ import annotations

import re
from typing import Annotated, Final

from pydantic import AfterValidator, Field

from .addresses import check_host

__all__ = [
    "AzureName",
    "DnsLabel",
    "Generation",
    "Host",
    "HostKey",
    "HostTemplate",
    "OrgId",
    "Port",
    "User",
]

_DNS_LABEL: Final = re.compile(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?")
_ORG_ID: Final = re.compile(r"[a-z0-9][a-z0-9_-]{0,31}")
_HOST_KEY: Final = re.compile(r"(ssh-ed25519|ssh-rsa|ecdsa-sha2-nistp(256|384|521)) [A-Za-z0-9+/]+={0,2}")
_AZURE_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.()-]{0,79}")


def _dns_label(value: str) -> str:
    if not _DNS_LABEL.fullmatch(value):
        raise ValueError(
            f"{value!r} is not a DNS label: use 1-63 lowercase letters, digits and '-', starting and ending "
            "with a letter or digit"
        )
    return value


def _org_id(value: str) -> str:
    if not _ORG_ID.fullmatch(value):
        raise ValueError(f"{value!r} is not a Pangolin org id: 1-32 lowercase letters, digits, '-' or '_'")
    return value


def _host_key(value: str) -> str:
    if not _HOST_KEY.fullmatch(value.strip()):
        raise ValueError(f"{value[:40]!r}... is not a public host key such as 'ssh-ed25519 AAAAC3Nza...'")
    return value.strip()


def _azure_name(value: str) -> str:
    if not _AZURE_NAME.fullmatch(value) or value.endswith("."):
        raise ValueError(f"{value!r} is not an Azure resource name (letters, digits, '_', '.', '-', 1-80)")
    return value


def _host_template(value: str) -> str:
    try:
        check_host(value.replace("{instance}", "x"))
    except ValueError:
        raise ValueError(
            f"{value!r} is not a host name with an optional {{instance}}, e.g. ssh-{{instance}}.example.com"
        ) from None
    return value


DnsLabel = Annotated[str, AfterValidator(_dns_label)]
Host = Annotated[str, AfterValidator(check_host)]
Port = Annotated[int, Field(ge=1, le=65535)]
Generation = Annotated[int, Field(ge=1, le=2**31 - 1)]
User = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9._-]{0,31}$")]
HostKey = Annotated[str, AfterValidator(_host_key)]
"""An SSH public key line such as `ssh-ed25519 AAAAC3Nza...` (the key type and its base64 blob)."""
HostTemplate = Annotated[str, AfterValidator(_host_template)]
"""A host name with an optional `{instance}`, e.g. `ssh-{instance}.example.com`."""
OrgId = Annotated[str, AfterValidator(_org_id)]
AzureName = Annotated[str, AfterValidator(_azure_name)]
