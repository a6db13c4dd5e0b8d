"""Pydantic models of what the client sends to and reads from Pangolin's Integration API.

Sending is strict (`extra="forbid"`): Pangolin's raw-resource schemas are strict too, and a raw
resource must never be sent SSO or other HTTP-auth fields (docs/pangolin-api.md §5). Reading is
tolerant (`extra="ignore"`): 1.18 and 1.19+ answer different shapes (§2.2, §2.6).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ssh_gateway.core.fields import Port

__all__ = [
    "Envelope",
    "LegacyRawResourceCreate",
    "Pagination",
    "Port",
    "Protocol",
    "RawResourceCreate",
    "RawResourceUpdate",
    "Resource",
    "Target",
    "TargetCreate",
    "TargetUpdate",
]

Protocol = Literal["tcp", "udp"]
Name = Annotated[str, Field(min_length=1, max_length=255)]


class _Send(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class _Read(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


# --- sent ------------------------------------------------------------------------------------


class RawResourceCreate(_Send):
    """`PUT /org/{orgId}/resource` body, 1.19+ dialect."""

    name: Name
    mode: Protocol
    proxyPort: Port


class LegacyRawResourceCreate(_Send):
    """`PUT /org/{orgId}/resource` body, 1.10-1.18 dialect (still accepted by 1.19+)."""

    name: Name
    http: Literal[False] = False
    protocol: Protocol
    proxyPort: Port


class RawResourceUpdate(_Send):
    """`POST /resource/{id}` body for a raw resource: only the fields that change."""

    name: Name | None = None
    proxyPort: Port | None = None
    enabled: bool | None = None

    @model_validator(mode="after")
    def _at_least_one(self) -> RawResourceUpdate:
        # Pangolin answers `{}` with 400 "At least one field must be provided for update".
        if self.name is None and self.proxyPort is None and self.enabled is None:
            raise ValueError("a resource update needs at least one of name, proxyPort, enabled")
        return self


class TargetCreate(_Send):
    """`PUT /resource/{id}/target` body. No `method`: that is for HTTP resources."""

    siteId: Annotated[int, Field(gt=0)]
    ip: Annotated[str, Field(min_length=1)]
    port: Port


class TargetUpdate(TargetCreate):
    """`POST /target/{id}` body: Pangolin requires `siteId` and `ip` every time (§3)."""


# --- read ------------------------------------------------------------------------------------


class Envelope(_Read):
    """Every answer: `{data, success, error, message, status}` (plus `stack` on errors)."""

    data: Any = None
    success: bool | None = None
    error: bool | None = None
    message: str | None = None
    status: int | None = None


class Resource(_Read):
    """A public resource as `GET /resource/{id}`, create, update and list items return it."""

    resourceId: int
    orgId: str | None = None
    niceId: str
    name: str
    proxyPort: int | None = None
    enabled: bool = True
    mode: str | None = None
    """1.19+: `http|ssh|rdp|vnc|tcp|udp|inference`."""
    http: bool | None = None
    """1.18 and older."""
    protocol: str | None = None
    """1.18 and older."""
    sso: bool | int | None = None
    """A bool, 0/1 in 1.22 list items, or null in 1.22 create/update answers."""

    @property
    def raw_protocol(self) -> Protocol | None:
        """`"tcp"`/`"udp"` for a raw resource in either shape; None for any other kind."""
        if self.mode is not None:
            kind = self.mode
        elif self.http is False:
            kind = self.protocol or ""
        else:
            return None
        if kind == "tcp":
            return "tcp"
        if kind == "udp":
            return "udp"
        return None


class Pagination(_Read):
    """`{total, page, pageSize}` (1.16+) or `{total, limit, offset}` (1.15 and older)."""

    total: int
    page: int | None = None
    pageSize: int | None = None
    limit: int | None = None
    offset: int | None = None


class Target(_Read):
    """A resource target."""

    targetId: int
    resourceId: int | None = None
    siteId: int
    ip: str
    port: int
    enabled: bool = True
    method: str | None = None
