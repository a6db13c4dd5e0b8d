"""The stack's outputs as one typed contract: `components/program.py` writes them under these keys and with
these values; the doctor, the demo, `ssh-config` and the preview summary read them back through
`read_outputs`, never by string keys of their own.

An output written by an older program lacks what it did not know yet; each such key is read with an explicit
default, named here once (and tested): an endpoint without `routing` is a port-mode one (the program before
CONNECT routing), a CONNECT entry without `via` goes through Pangolin and one without `gateway.kind` is an Istio
gateway (both the only kinds before `via: direct` and `kind: envoy`), and without `acceptHttp10` HTTP/1.0 is off.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Final

__all__ = [
    "CONNECT",
    "ENDPOINTS",
    "ENVOY_CONFIG",
    "KNOWN_HOSTS",
    "PANGOLIN",
    "SSH_CONFIG",
    "ConnectOutput",
    "EndpointOutput",
    "GatewayKind",
    "Routing",
    "StackOutputs",
    "Via",
    "read_outputs",
]


class Routing(StrEnum):
    """How the public reaches an instance: a public port of its own, or HTTP CONNECT through the stack's entry."""

    PORT = "port"
    CONNECT = "connect"


class GatewayKind(StrEnum):
    """What terminates CONNECT: Istio's ingress gateway patched by EnvoyFilters, or a standalone Envoy."""

    ISTIO = "istio"
    ENVOY = "envoy"


class Via(StrEnum):
    """How the public reaches the CONNECT gateway: a Pangolin resource to it, or its own address."""

    PANGOLIN = "pangolin"
    DIRECT = "direct"


ENDPOINTS: Final = "endpoints"
PANGOLIN: Final = "pangolin"
CONNECT: Final = "connect"
SSH_CONFIG: Final = "sshConfig"
KNOWN_HOSTS: Final = "knownHosts"
ENVOY_CONFIG: Final = "envoyConfig"

DEFAULT_ROUTING: Final = Routing.PORT
"""An endpoint without `routing`: the program before CONNECT routing wrote only port-mode ones."""
DEFAULT_VIA: Final = Via.PANGOLIN
DEFAULT_GATEWAY_KIND: Final = GatewayKind.ISTIO
"""A CONNECT entry without `gateway.kind`: Istio was the only gateway before `kind: envoy`."""


@dataclass(frozen=True)
class EndpointOutput:
    """`endpoints[<instance>]`: how ssh reaches one instance."""

    routing: Routing
    host: str
    """The public host (a connect-mode instance: the CONNECT entry's)."""
    port: int
    user: str
    ssh: str
    """The ssh command a person types."""
    pangolin_resource_id: int | None
    """Its Pangolin resource (a connect-mode instance: the CONNECT entry's), None when there is none."""
    authority: str | None = None
    """A connect-mode instance's CONNECT authority (its ssh HostName)."""
    route: str | None = None
    """A connect-mode instance's route: its EnvoyFilter, or `envoyConfig/<virtual host>`."""


@dataclass(frozen=True)
class ConnectOutput:
    """`connect`: the stack's one CONNECT entry."""

    via: Via
    host: str
    port: int
    gateway_kind: GatewayKind
    accept_http10: bool
    pangolin_resource_id: int | None = None
    gateway: Mapping[str, Any] = field(default_factory=dict)
    """The rest of `connect.gateway` (listener port, Service, ...), as written, for people."""


@dataclass(frozen=True)
class StackOutputs:
    """What the tools read of a stack's outputs."""

    endpoints: Mapping[str, EndpointOutput]
    pangolin_url: str | None
    ssh_config: str
    known_hosts: str
    envoy_config: str
    connect: ConnectOutput | None = None
    has_ssh_config: bool = True
    """Whether the stack has an `sshConfig` output at all (a stack never brought `up` has none)."""


def _int_or_none(value: object) -> int | None:
    """An id as the engine hands it back (JSON numbers come back as floats: 7.0)."""
    if value is None:
        return None
    return int(value) if isinstance(value, int | float) else int(str(value))


def _endpoint(value: Mapping[str, Any]) -> EndpointOutput:
    return EndpointOutput(
        routing=Routing(value.get("routing") or DEFAULT_ROUTING),
        host=str(value["host"]),
        port=int(value["port"]),
        user=str(value.get("user", "")),
        ssh=str(value.get("ssh", "")),
        pangolin_resource_id=_int_or_none(value.get("pangolinResourceId")),
        authority=str(value["authority"]) if value.get("authority") else None,
        route=str(value["route"]) if value.get("route") else None,
    )


def _connect(value: Mapping[str, Any]) -> ConnectOutput:
    gateway = dict(value.get("gateway") or {})
    return ConnectOutput(
        via=Via(value.get("via") or DEFAULT_VIA),
        host=str(value.get("host", "")),
        port=int(value.get("port") or 0),
        gateway_kind=GatewayKind(gateway.get("kind") or DEFAULT_GATEWAY_KIND),
        accept_http10=bool(value.get("acceptHttp10")),
        pangolin_resource_id=_int_or_none(value.get("pangolinResourceId")),
        gateway=gateway,
    )


def read_outputs(outputs: Mapping[str, Any]) -> StackOutputs:
    """A stack's outputs (`pulumi stack output --json`, or the Automation API's values) as the contract."""
    endpoints = dict(outputs.get(ENDPOINTS) or {})
    connect = outputs.get(CONNECT)
    pangolin = dict(outputs.get(PANGOLIN) or {})
    return StackOutputs(
        endpoints={name: _endpoint(ep) for name, ep in sorted(endpoints.items())},
        pangolin_url=str(pangolin["url"]) if pangolin.get("url") else None,
        ssh_config=str(outputs.get(SSH_CONFIG) or ""),
        known_hosts=str(outputs.get(KNOWN_HOSTS) or ""),
        envoy_config=str(outputs.get(ENVOY_CONFIG) or ""),
        connect=_connect(connect) if isinstance(connect, Mapping) else None,
        has_ssh_config=SSH_CONFIG in outputs,
    )
