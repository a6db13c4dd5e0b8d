"""What the doctor checks and what it found: endpoints from the stack's outputs, checks, and the verdict."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ssh_gateway.core.names import pangolin_resource_name

__all__ = ["LAYERS", "Check", "Endpoint", "InstanceReport", "Status", "endpoints_from_outputs", "parse_known_hosts"]

Status = Literal["ok", "fail", "warn", "skip"]
"""ok: passed; fail: this layer is broken; warn: could not be checked; skip: not reached or not applicable."""

LAYERS = ("dns", "tcp", "banner", "hostkey", "pangolin")
"""The checks, in the order they run: along the path from the client to sshd, then Pangolin's own view."""


@dataclass(frozen=True)
class Check:
    """The result of one layer's check."""

    layer: str
    """One of `LAYERS`."""
    status: Status
    detail: str
    """What was seen, e.g. "TCP connect to gw:40001 timed out after 3.0s"."""
    fix: str = ""
    """The likely fix when the layer is broken."""


@dataclass(frozen=True)
class Endpoint:
    """One instance as the stack's outputs describe it."""

    instance: str
    host: str
    port: int
    user: str
    resource_id: int | None
    """Its Pangolin resource, from `endpoints[*].pangolinResourceId`."""
    pinned_key: str | None
    """`ssh-ed25519 AAAA...` from the stack's `knownHosts`, when a host key is pinned."""
    expected_name: str
    """The Pangolin resource name the stack gives this instance."""


@dataclass(frozen=True)
class InstanceReport:
    """Every check of one instance, and which layer is broken."""

    endpoint: Endpoint
    checks: tuple[Check, ...]

    @property
    def broken(self) -> Check | None:
        """The first broken layer, or None when the instance is healthy.

        A failed Pangolin check outranks a refused or dropped connection: a missing, disabled or moved resource
        is why the gateway refuses the port or closes it without a banner, so it is the layer to fix.
        """
        failed = [c for c in self.checks if c.status == "fail"]
        if not failed:
            return None
        pangolin = next((c for c in failed if c.layer == "pangolin"), None)
        if pangolin is not None and failed[0].layer in ("tcp", "banner"):
            return pangolin
        return failed[0]

    def check(self, layer: str) -> Check:
        return next(c for c in self.checks if c.layer == layer)


def parse_known_hosts(text: str) -> dict[tuple[str, int], str]:
    """`[host]:port keytype base64` (or `host keytype base64`, port 22) lines -> {(host, port): "keytype base64"}."""
    pins: dict[tuple[str, int], str] = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 3 or line.startswith("#"):
            continue
        where, key = fields[0], f"{fields[1]} {fields[2]}"
        if where.startswith("["):
            host, _, port = where[1:].partition("]:")
            pins[(host, int(port))] = key
        else:
            pins[(where, 22)] = key
    return pins


def endpoints_from_outputs(outputs: Mapping[str, Any], *, project: str, stack: str) -> list[Endpoint]:
    """The instances of a stack from its outputs (`endpoints`, `knownHosts`), in name order."""
    pins = parse_known_hosts(str(outputs.get("knownHosts") or ""))
    endpoints = []
    for name, ep in sorted(dict(outputs.get("endpoints") or {}).items()):
        host, port = str(ep["host"]), int(ep["port"])
        resource_id = ep.get("pangolinResourceId")
        endpoints.append(
            Endpoint(
                instance=name,
                host=host,
                port=port,
                user=str(ep.get("user", "")),
                resource_id=int(resource_id) if resource_id is not None else None,
                pinned_key=pins.get((host, port)),
                expected_name=pangolin_resource_name(project, stack, name),
            )
        )
    return endpoints
