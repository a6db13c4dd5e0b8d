"""The stack's outputs as one contract, both ways: every key is declared here once; `components/program.py` (and
the floor benchmark's program) writes them through the writers below, and the doctor, the demo, `ssh-config`,
`gateway-config` and the preview summary read them back through `parse_stack_outputs`, never by string keys of
their own. tests/unit/test_outputs_contract.py runs the program and fails on a key written but not declared here,
or declared but never written.

The writers take the program's values as they are (`pulumi.Output`s among them: this module stays Pulumi-free)
and never wrap them, so the program's outputs stay dicts of Outputs (one `Output.all` over them is quadratic,
see `build`).

An output written by an older program lacks what it did not know yet; each such key is read with an explicit
default, named here once (and tested): an endpoint without `routing` is a port-mode one (the program before
CONNECT routing), a CONNECT entry without `via` goes through Pangolin and one without `gateway.kind` is an Istio
gateway (both the only kinds before `via: direct` and `kind: envoy`), and without `acceptHttp10` HTTP/1.0 is off.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Final

from .names import entry_point_name
from .ports import PortRange

__all__ = [
    "DEFAULT_GATEWAY_KIND",
    "DEFAULT_VIA",
    "ConnectGatewayKey",
    "ConnectKey",
    "ConnectOutput",
    "EndpointKey",
    "EndpointOutput",
    "GatewayKey",
    "GatewayKind",
    "GatewayOutput",
    "HostCaKey",
    "OutputKey",
    "PangolinKey",
    "Routing",
    "StackOutputs",
    "Via",
    "connect_endpoint",
    "connect_output",
    "envoy_gateway_output",
    "gateway_output",
    "host_ca_entry",
    "istio_gateway_output",
    "parse_stack_outputs",
    "port_endpoint",
    "stack_outputs",
    "traefik_entry_point",
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


# --- the keys ------------------------------------------------------------------------------------------------------


class OutputKey(StrEnum):
    """The stack's outputs, each `pulumi stack output <key>`."""

    ENDPOINTS = "endpoints"
    """{instance: `EndpointKey` fields}: how ssh reaches each instance, in the settings' order."""
    PANGOLIN = "pangolin"
    """`PangolinKey` fields: the Pangolin API and org the stack's resources live in."""
    SSH_CONFIG = "sshConfig"
    """Every instance's `Host` block, for ~/.ssh/config."""
    KNOWN_HOSTS = "knownHosts"
    """The `@cert-authority` lines of the published CAs, then a plain line per pinned `hostKey`."""
    HOST_KEYS = "hostKeys"
    """{instance: known_hosts line} for each instance whose host key the stack vouches for."""
    HOST_CA = "hostCa"
    """[`HostCaKey` fields], one per published CA generation."""
    ALLOCATIONS = "allocations"
    """{instance: public port} of the port-mode instances."""
    RELEASED_PORTS = "releasedPorts"
    """The ports the last run released."""
    PORT_RANGE = "portRange"
    """`start-end`, or null for a stack without a range."""
    GATEWAY = "gateway"
    """`GatewayKey` fields: what the gateway host must publish."""
    CONNECT = "connect"
    """`ConnectKey` fields: the stack's CONNECT entry (only a stack with `ssh-gateway:connect`)."""
    ENVOY_CONFIG = "envoyConfig"
    """The standalone Envoy's bootstrap YAML (only with `kind: envoy` and a connect-mode instance)."""


class EndpointKey(StrEnum):
    """The fields of an `endpoints` entry."""

    ROUTING = "routing"
    HOST = "host"
    PORT = "port"
    USER = "user"
    SSH = "ssh"
    PANGOLIN_RESOURCE_ID = "pangolinResourceId"
    AUTHORITY = "authority"
    """Connect-mode only."""
    ROUTE = "route"
    """Connect-mode only."""


class PangolinKey(StrEnum):
    URL = "url"
    ORG_ID = "orgId"


class HostCaKey(StrEnum):
    GENERATION = "generation"
    PUBLIC_KEY = "publicKey"
    FINGERPRINT = "fingerprint"
    SIGNING = "signing"


class GatewayKey(StrEnum):
    GERBIL_PUBLISHED_PORTS = "gerbilPublishedPorts"
    """Gerbil's `ports:` line for the range, when some instance has a port of its own."""
    GERBIL_CONNECT_PORT = "gerbilConnectPort"
    """Gerbil's `ports:` line for the CONNECT port, when the entry goes through Pangolin."""
    TRAEFIK_ENTRY_POINTS = "traefikEntryPoints"
    """Traefik's static `entryPoints`: {`tcp-<port>`: `traefik_entry_point(port)`}."""


class ConnectKey(StrEnum):
    VIA = "via"
    HOST = "host"
    PORT = "port"
    PANGOLIN_RESOURCE_ID = "pangolinResourceId"
    ACCEPT_HTTP10 = "acceptHttp10"
    SERVER_ALIVE_INTERVAL = "serverAliveInterval"
    GATEWAY = "gateway"
    """`ConnectGatewayKey` fields."""


class ConnectGatewayKey(StrEnum):
    KIND = "kind"
    LISTENER_PORT = "listenerPort"
    SERVICE_PORT = "servicePort"
    TARGET_HOST = "targetHost"
    """Envoy only."""
    NAMESPACE = "namespace"
    """Istio only, as are `selector`, `service` and `createGateway`."""
    SELECTOR = "selector"
    SERVICE = "service"
    CREATE_GATEWAY = "createGateway"


_ADDRESS: Final = "address"

DEFAULT_ROUTING: Final = Routing.PORT
"""An endpoint without `routing`: the program before CONNECT routing wrote only port-mode ones."""
DEFAULT_VIA: Final = Via.PANGOLIN
DEFAULT_GATEWAY_KIND: Final = GatewayKind.ISTIO
"""A CONNECT entry without `gateway.kind`: Istio was the only gateway before `kind: envoy`."""


# --- writing -------------------------------------------------------------------------------------------------------


def stack_outputs(
    *,
    endpoints: Mapping[str, object],
    pangolin_url: str,
    pangolin_org_id: str,
    ssh_config: object,
    known_hosts: object,
    host_keys: Mapping[str, object],
    host_ca: Sequence[object],
    allocations: object,
    released_ports: object,
    port_range: PortRange | None,
    gateway: Mapping[str, object],
    connect: object | None = None,
    envoy_config: object | None = None,
) -> dict[str, object]:
    """Every output of a stack, under its key; `connect` and `envoyConfig` only when given (a stack without them
    has no such key, not a null one)."""
    out: dict[str, object] = {
        OutputKey.ENDPOINTS: endpoints,
        OutputKey.PANGOLIN: {PangolinKey.URL: pangolin_url, PangolinKey.ORG_ID: pangolin_org_id},
        OutputKey.SSH_CONFIG: ssh_config,
        OutputKey.KNOWN_HOSTS: known_hosts,
        OutputKey.HOST_KEYS: host_keys,
        OutputKey.HOST_CA: host_ca,
        OutputKey.ALLOCATIONS: allocations,
        OutputKey.RELEASED_PORTS: released_ports,
        OutputKey.PORT_RANGE: str(port_range) if port_range is not None else None,
        OutputKey.GATEWAY: gateway,
    }
    if connect is not None:
        out[OutputKey.CONNECT] = connect
    if envoy_config is not None:
        out[OutputKey.ENVOY_CONFIG] = envoy_config
    return out


def port_endpoint(
    *, host: object, port: object, user: object, ssh: object, pangolin_resource_id: object
) -> dict[str, object]:
    """A port-mode instance's `endpoints` entry: its own public host and port."""
    return {
        EndpointKey.ROUTING: Routing.PORT.value,
        EndpointKey.HOST: host,
        EndpointKey.PORT: port,
        EndpointKey.USER: user,
        EndpointKey.SSH: ssh,
        EndpointKey.PANGOLIN_RESOURCE_ID: pangolin_resource_id,
    }


def connect_endpoint(
    *,
    host: object,
    port: object,
    authority: object,
    route: object,
    user: object,
    ssh: object,
    pangolin_resource_id: object,
) -> dict[str, object]:
    """A connect-mode instance's `endpoints` entry: the shared CONNECT entry and the instance's authority."""
    return {
        EndpointKey.ROUTING: Routing.CONNECT.value,
        EndpointKey.HOST: host,
        EndpointKey.PORT: port,
        EndpointKey.AUTHORITY: authority,
        EndpointKey.ROUTE: route,
        EndpointKey.USER: user,
        EndpointKey.SSH: ssh,
        EndpointKey.PANGOLIN_RESOURCE_ID: pangolin_resource_id,
    }


def host_ca_entry(*, generation: int, public_key: object, fingerprint: object, signing: bool) -> dict[str, object]:
    """A `hostCa` entry: one published CA generation, and whether it is the one that signs."""
    return {
        HostCaKey.GENERATION: generation,
        HostCaKey.PUBLIC_KEY: public_key,
        HostCaKey.FINGERPRINT: fingerprint,
        HostCaKey.SIGNING: signing,
    }


def traefik_entry_point(port: int) -> dict[str, str]:
    """Traefik's static entry point of a public port (its name is `entry_point_name(port)`)."""
    return {_ADDRESS: f":{port}/tcp"}


def gateway_output(*, published: PortRange | None, connect_port: int | None) -> dict[str, object]:
    """What the gateway host must publish: the range's Gerbil line and entry points (`published`), the CONNECT
    port's (`connect_port`), or neither."""
    out: dict[str, object] = {}
    entry_points: dict[str, dict[str, str]] = {}
    if published is not None:
        out[GatewayKey.GERBIL_PUBLISHED_PORTS] = f"{published}:{published}/tcp"
        entry_points.update({entry_point_name(port): traefik_entry_point(port) for port in published})
    if connect_port is not None:
        out[GatewayKey.GERBIL_CONNECT_PORT] = f"{connect_port}:{connect_port}/tcp"
        entry_points[entry_point_name(connect_port)] = traefik_entry_point(connect_port)
    out[GatewayKey.TRAEFIK_ENTRY_POINTS] = entry_points
    return out


def connect_output(
    *,
    via: str,
    host: object,
    port: object,
    pangolin_resource_id: object,
    accept_http10: bool,
    server_alive_interval: int,
    gateway: Mapping[str, object],
) -> dict[str, object]:
    """The stack's CONNECT entry, for the doctor and for people: how it is reached and which gateway it is."""
    return {
        ConnectKey.VIA: via,
        ConnectKey.HOST: host,
        ConnectKey.PORT: port,
        ConnectKey.PANGOLIN_RESOURCE_ID: pangolin_resource_id,
        ConnectKey.ACCEPT_HTTP10: accept_http10,
        ConnectKey.SERVER_ALIVE_INTERVAL: server_alive_interval,
        ConnectKey.GATEWAY: gateway,
    }


def envoy_gateway_output(*, listener_port: int, target_host: str, service_port: int) -> dict[str, object]:
    """`connect.gateway` of a standalone Envoy."""
    return {
        ConnectGatewayKey.KIND: GatewayKind.ENVOY.value,
        ConnectGatewayKey.LISTENER_PORT: listener_port,
        ConnectGatewayKey.TARGET_HOST: target_host,
        ConnectGatewayKey.SERVICE_PORT: service_port,
    }


def istio_gateway_output(
    *,
    listener_port: int,
    namespace: str,
    selector: Mapping[str, str],
    service: str,
    service_port: int,
    create_gateway: bool,
) -> dict[str, object]:
    """`connect.gateway` of Istio's ingress gateway."""
    return {
        ConnectGatewayKey.KIND: GatewayKind.ISTIO.value,
        ConnectGatewayKey.LISTENER_PORT: listener_port,
        ConnectGatewayKey.NAMESPACE: namespace,
        ConnectGatewayKey.SELECTOR: dict(selector),
        ConnectGatewayKey.SERVICE: service,
        ConnectGatewayKey.SERVICE_PORT: service_port,
        ConnectGatewayKey.CREATE_GATEWAY: create_gateway,
    }


# --- reading -------------------------------------------------------------------------------------------------------


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
class GatewayOutput:
    """`gateway`: what the gateway host must publish."""

    traefik_entry_points: Mapping[str, Any]
    """As written (Traefik reads it as is): {`tcp-<port>`: `traefik_entry_point(port)`}; checked by its readers."""
    gerbil_published_ports: str | None = None
    gerbil_connect_port: str | None = None


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
    gateway: GatewayOutput | None = None
    """None when the stack has no `gateway.traefikEntryPoints` (a stack never brought `up`)."""
    allocations: Mapping[str, int] = field(default_factory=dict)
    port_range: PortRange | None = None


def _int_or_none(value: object) -> int | None:
    """An id as the engine hands it back (JSON numbers come back as floats: 7.0)."""
    if value is None:
        return None
    return int(value) if isinstance(value, int | float) else int(str(value))


def _endpoint(value: Mapping[str, Any]) -> EndpointOutput:
    return EndpointOutput(
        routing=Routing(value.get(EndpointKey.ROUTING) or DEFAULT_ROUTING),
        host=str(value[EndpointKey.HOST]),
        port=int(value[EndpointKey.PORT]),
        user=str(value.get(EndpointKey.USER, "")),
        ssh=str(value.get(EndpointKey.SSH, "")),
        pangolin_resource_id=_int_or_none(value.get(EndpointKey.PANGOLIN_RESOURCE_ID)),
        authority=str(value[EndpointKey.AUTHORITY]) if value.get(EndpointKey.AUTHORITY) else None,
        route=str(value[EndpointKey.ROUTE]) if value.get(EndpointKey.ROUTE) else None,
    )


def _connect(value: Mapping[str, Any]) -> ConnectOutput:
    gateway = dict(value.get(ConnectKey.GATEWAY) or {})
    return ConnectOutput(
        via=Via(value.get(ConnectKey.VIA) or DEFAULT_VIA),
        host=str(value.get(ConnectKey.HOST, "")),
        port=int(value.get(ConnectKey.PORT) or 0),
        gateway_kind=GatewayKind(gateway.get(ConnectGatewayKey.KIND) or DEFAULT_GATEWAY_KIND),
        accept_http10=bool(value.get(ConnectKey.ACCEPT_HTTP10)),
        pangolin_resource_id=_int_or_none(value.get(ConnectKey.PANGOLIN_RESOURCE_ID)),
        gateway=gateway,
    )


def _gateway(value: object) -> GatewayOutput | None:
    entry_points = value.get(GatewayKey.TRAEFIK_ENTRY_POINTS) if isinstance(value, Mapping) else None
    if not isinstance(value, Mapping) or not isinstance(entry_points, Mapping):
        return None
    published, connect = value.get(GatewayKey.GERBIL_PUBLISHED_PORTS), value.get(GatewayKey.GERBIL_CONNECT_PORT)
    return GatewayOutput(
        traefik_entry_points=dict(entry_points),
        gerbil_published_ports=str(published) if published else None,
        gerbil_connect_port=str(connect) if connect else None,
    )


def parse_stack_outputs(outputs: Mapping[str, Any]) -> StackOutputs:
    """A stack's outputs (`pulumi stack output --json`, or the Automation API's values) as the contract; a value
    of the wrong shape is a `KeyError`, `TypeError` or `ValueError`."""
    endpoints = dict(outputs.get(OutputKey.ENDPOINTS) or {})
    connect = outputs.get(OutputKey.CONNECT)
    pangolin = dict(outputs.get(OutputKey.PANGOLIN) or {})
    port_range = outputs.get(OutputKey.PORT_RANGE)
    return StackOutputs(
        endpoints={name: _endpoint(ep) for name, ep in sorted(endpoints.items())},
        pangolin_url=str(pangolin[PangolinKey.URL]) if pangolin.get(PangolinKey.URL) else None,
        ssh_config=str(outputs.get(OutputKey.SSH_CONFIG) or ""),
        known_hosts=str(outputs.get(OutputKey.KNOWN_HOSTS) or ""),
        envoy_config=str(outputs.get(OutputKey.ENVOY_CONFIG) or ""),
        connect=_connect(connect) if isinstance(connect, Mapping) else None,
        has_ssh_config=OutputKey.SSH_CONFIG in outputs,
        gateway=_gateway(outputs.get(OutputKey.GATEWAY)),
        allocations={str(k): int(v) for k, v in dict(outputs.get(OutputKey.ALLOCATIONS) or {}).items()},
        port_range=PortRange.parse(port_range) if port_range else None,
    )
