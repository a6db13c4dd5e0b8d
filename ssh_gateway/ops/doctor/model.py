"""What the doctor checks and what it found: endpoints from the stack's outputs, checks, and the verdict."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ssh_gateway.core.names import connect_resource_name, pangolin_resource_name, ssh_alias

__all__ = ["LAYERS", "Check", "Endpoint", "InstanceReport", "Status", "endpoints_from_outputs", "parse_known_hosts"]

Status = Literal["ok", "fail", "warn", "skip"]
"""ok: passed; fail: this layer is broken; warn: could not be checked; skip: not reached or not applicable."""

LAYERS = ("dns", "tcp", "connect", "banner", "hostkey", "pangolin")
"""The checks, in the order they run: along the path from the client to sshd, then Pangolin's own view. The
`connect` layer (the gateway answers the instance's HTTP CONNECT) is only on connect-mode instances' paths."""


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
    """The Pangolin resource name the stack gives this instance (a connect-mode one: the CONNECT entry's)."""
    routing: str = "port"
    """`port`: `host:port` is the instance's own; `connect`: it is the stack's CONNECT entry."""
    authority: str | None = None
    """A connect-mode instance's CONNECT authority (its ssh HostName)."""
    route: str | None = None
    """A connect-mode instance's EnvoyFilter, `<namespace>/<name>`."""
    accept_http10: bool = False
    """The stack turns HTTP/1.0 CONNECT on (`nc -X connect`): the doctor checks that the gateway accepts it."""
    via: str | None = None
    """A connect-mode instance's entry: `pangolin` (a Pangolin resource to check) or `direct`."""

    @property
    def alias(self) -> str:
        """The ssh `Host` alias, and a connect-mode instance's HostKeyAlias."""
        return ssh_alias(self.instance)


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
        """The check of `layer`; a `skip` when it is not on this instance's path (e.g. `connect` in port mode)."""
        return next((c for c in self.checks if c.layer == layer), Check(layer, "skip", "not on this path"))


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
    """The instances of a stack from its outputs (`endpoints`, `knownHosts`, `connect`), in name order."""
    pins = parse_known_hosts(str(outputs.get("knownHosts") or ""))
    connect = dict(outputs.get("connect") or {})
    endpoints = []
    for name, ep in sorted(dict(outputs.get("endpoints") or {}).items()):
        host, port = str(ep["host"]), int(ep["port"])
        resource_id = ep.get("pangolinResourceId")
        common: dict[str, Any] = {
            "instance": name,
            "host": host,
            "port": port,
            "user": str(ep.get("user", "")),
            "resource_id": int(resource_id) if resource_id is not None else None,
        }
        if ep.get("routing") == "connect":
            # ssh looks the key up under the HostKeyAlias (a `ssh-<instance> key` line), not the gateway's address.
            endpoint = Endpoint(
                **common,
                pinned_key=pins.get((ssh_alias(name), 22)),
                expected_name=connect_resource_name(project, stack),
                routing="connect",
                authority=str(ep["authority"]),
                route=str(ep["route"]) if ep.get("route") else None,
                accept_http10=bool(connect.get("acceptHttp10")),
                via=str(connect.get("via") or "pangolin"),
            )
        else:
            endpoint = Endpoint(
                **common, pinned_key=pins.get((host, port)), expected_name=pangolin_resource_name(project, stack, name)
            )
        endpoints.append(endpoint)
    return endpoints
