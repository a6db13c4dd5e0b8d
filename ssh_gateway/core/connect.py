"""The CONNECT vocabulary: every instance behind one gateway port, SSH inside an HTTP CONNECT tunnel.

The client runs `ssh` with `HostName <authority>` and `ProxyCommand proxytunnel -p <gateway> -d %h:%p`; the
Istio ingress gateway (Envoy) terminates `CONNECT <authority>:22`, picks the route by the authority and
opens raw TCP to the instance's Service `ssh-<instance>` on port 22 (cluster `outbound|22||<authority>`,
the name istiod gives that Service's cluster). This module only builds the gateway's configuration, as plain
dicts: the Istio manifests below, or (`connect.gateway.kind: envoy`) a standalone Envoy's whole bootstrap
(`envoy_bootstrap`, at the end). It imports nothing from Pulumi.

Two EnvoyFilters do it:

1. `gateway_connect_filter`: one per stack. A `NETWORK_FILTER` `MERGE` into the HCM of the gateway's
   listener on `listener_port`: `upgrade_configs: [{upgrade_type: CONNECT}]` and
   `http2_protocol_options.allow_connect`, optionally `http_protocol_options.accept_http_10` for HTTP/1.0
   clients (`nc -X connect`, socat; without it Envoy answers them `426 Upgrade Required`).
2. `instance_route_filter`: one per instance. A `VIRTUAL_HOST` `ADD` on the gateway's
   `ROUTE_CONFIGURATION` of that port, whose only route is a `connect_matcher` to the instance's cluster
   with `upgrade_configs: [{upgrade_type: CONNECT, connect_config: {}}]` (terminate CONNECT, forward the
   tunnel's bytes as TCP).

Why a `VIRTUAL_HOST` `ADD`, and not the seed's `MERGE` of a `route_config` into the HCM (read in istio/istio
at the pseudo-version in scripts/toolchain/versions.env):

- An Istio gateway's HCM gets its routes over RDS: `pilot/pkg/networking/core/listener_builder.go`
  (`buildHTTPConnectionManager`) sets `RouteSpecifier = &hcm.HttpConnectionManager_Rds{...}` whenever the
  listener has a route name, and gateways always do (`gateway.go`: `rds: routeName`, `http.<port>`).
- A `NETWORK_FILTER` `MERGE` runs `util.MergeAnyWithAny(filter.GetTypedConfig(), userFilter.GetTypedConfig())`
  (`pilot/pkg/networking/core/envoyfilter/listener_patch.go`, `patchNetworkFilter`), a protobuf merge
  (`pkg/proto/merge/merge.go`). `rds` and `route_config` are members of one oneof (`route_specifier`):
  setting `route_config` clears `rds`. The port's HCM then stops asking RDS and serves only the merged
  inline routes: every VirtualService bound to that gateway port is gone, and so is everything istiod sets
  on the route configuration (`ignore_port_in_host_matching`, `validate_clusters: false`, ...). Several
  instances' MERGEs append their virtual hosts into that one inline table. It "works" for SSH and
  silently takes the port's other traffic down.
- A `VIRTUAL_HOST` `ADD` is applied by `ApplyRouteConfigurationPatches` (`rc_patch.go`, `patchVirtualHosts`):
  it appends a clone of our virtual host to the route configuration istiod built, matched by
  `routeConfigurationMatch` (for gateways: name, port number through the gateway's target-port map, port
  name, gateway), leaving every other virtual host and every setting in place. Removing an instance removes
  only its EnvoyFilter, hence only its virtual host.

Domains: Istio sets `ignore_port_in_host_matching: true` on gateway route configurations
(`pilot/pkg/networking/core/gateway.go`, `buildGatewayRoutesFromServers`), so Envoy strips the port of
`CONNECT host:22` before matching and a domain `host:22` alone never matches (the seed's `svc...local:80` is
a 404 there). Each virtual host lists both `authority` (what matches on Istio gateways) and `authority:22`
(what matches where ports are not ignored). Envoy refuses a route configuration in which a domain repeats
across virtual hosts, and a refused (NACKed) RDS update takes every route of that port with it, so
authorities must be unique across the stack: `connect_manifests` checks that.

Ports: the listener match compares `portNumber` with the port the gateway's Envoy listener binds, i.e. the
gateway pod's (target) port, e.g. 8080 behind Service port 80 (`listener_patch.go`, `listenerMatch`).
`listener_port` is therefore the pod port. The gateway also needs an Istio `Gateway` with an HTTP server on
that port, or istiod builds no listener and no route configuration for these filters to patch: most clusters
have one on port 80 already; where none has, `istio_gateway` (`connect.gateway.createGateway`) is one with a
single HTTP server on the gateway Service's port. istiod names that port's route configuration after the pod
port the Service port resolves to, `http.<listener_port>` (`pilot/pkg/model/gateway.go`, `resolvePorts` and
`gatewayRDSRouteName`; `gateway_route_name`), and the route filters match it by that name. Not by
`portNumber`: for a route configuration whose port the gateway's Service maps (8080 behind 80), istiod
compares `portNumber` with the Service ports only (`rc_patch.go`, `anyPortMatches`), so the pod port never
matches there and the virtual host is silently not added (tests/integration/test_istiod_gateway.py shows it on
a real istiod).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from .addresses import check_dns_label, check_dns_name
from .names import INSTANCE_LABEL, MANAGED_BY, MANAGED_BY_LABEL, service_name
from .ports import PORT_MAX, PORT_MIN, is_port
from .targets import StaticTarget, cluster_dns_name

__all__ = [
    "HCM_FILTER",
    "HCM_TYPE",
    "ROUTER_FILTER",
    "ROUTER_TYPE",
    "SSH_PORT",
    "ConnectGateway",
    "ConnectInstance",
    "DirectEntry",
    "Entry",
    "EnvoyRoute",
    "GatewayServer",
    "PangolinEntry",
    "ServiceUpstream",
    "StandaloneEnvoy",
    "Upstream",
    "check_selector",
    "connect_authority",
    "connect_cluster",
    "connect_domains",
    "connect_manifests",
    "connect_ssh_config",
    "connect_virtual_host",
    "envoy_bootstrap",
    "envoy_bootstrap_yaml",
    "gateway_connect_filter",
    "gateway_route_name",
    "instance_filter_name",
    "instance_route_filter",
    "istio_gateway",
    "namespace_hosts",
    "proxytunnel_command",
]

SSH_PORT = 22
"""The port of every instance's `ssh-<instance>` Service, and the `%p` of the client's CONNECT target."""
CONNECT_UPGRADE = "CONNECT"
HCM_FILTER = "envoy.filters.network.http_connection_manager"
HCM_TYPE = "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager"
ROUTER_FILTER = "envoy.filters.http.router"
ROUTER_TYPE = "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"
ENVOY_FILTER_API = "networking.istio.io/v1alpha3"
GATEWAY_FILTER_NAME = "ssh-gateway-connect"
"""The gateway EnvoyFilter's name: one per gateway on purpose. A second stack on the same gateway fails to create
it (it exists) instead of turning CONNECT on twice, which Envoy refuses (`multiple upgrade configs with the same
name`); that stack sets `enableConnect: false`."""

GATEWAY_API = "networking.istio.io/v1"
GATEWAY_NAME = "ssh-gateway-connect"
"""The Istio `Gateway`'s name (a DNS label, as Istio requires of Gateways): one per gateway workload, like the
gateway filter's."""
GATEWAY_SERVER_PORT_NAME = "http-ssh-connect"

# Kubernetes label values (and the name part of keys): up to 63 of [A-Za-z0-9_.-], alphanumeric at both ends.
_LABEL_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")


def _check_port(what: str, value: int) -> None:
    if not is_port(value):
        raise ValueError(f"{what} {value!r} is not a port: an integer {PORT_MIN}-{PORT_MAX}")


def check_selector(selector: Mapping[str, str]) -> None:
    """A `ValueError` naming the problem unless `selector` is a non-empty set of Kubernetes labels."""
    if not selector:
        raise ValueError(
            "the ingress gateway's selector is empty: give its pods' labels (e.g. {istio: ingressgateway}); an empty "
            "workloadSelector would patch every proxy in the namespace"
        )
    for key, value in selector.items():
        prefix, _, name = key.rpartition("/") if isinstance(key, str) else ("", "", "")
        if not name or len(name) > 63 or not _LABEL_NAME.fullmatch(name) or (prefix and _bad_prefix(prefix)):
            raise ValueError(f"selector key {key!r} is not a Kubernetes label key ([prefix/]name, name 1-63 chars)")
        if not isinstance(value, str) or len(value) > 63 or (value and not _LABEL_NAME.fullmatch(value)):
            raise ValueError(f"selector value {value!r} of {key!r} is not a Kubernetes label value (0-63 chars)")


def _bad_prefix(prefix: str) -> bool:
    try:
        check_dns_name(prefix, what="prefix")
    except ValueError:
        return True
    return False


def connect_authority(instance: str, namespace: str, cluster_domain: str = "cluster.local") -> str:
    """`ssh-<instance>.<namespace>.svc.<cluster_domain>`: the cluster DNS name of the instance's Service, which
    the client sends as its CONNECT authority (ssh `HostName`) and the gateway routes on."""
    check_dns_label(instance, what="instance name", max_length=59)  # ssh-<instance> must stay a DNS label
    check_dns_label(namespace, what="namespace")
    check_dns_name(cluster_domain, what="cluster domain")
    return cluster_dns_name(service_name(instance), namespace, cluster_domain)


def gateway_route_name(listener_port: int) -> str:
    """`http.<listener_port>`: the name istiod gives the route configuration of a gateway's plain-HTTP servers
    whose Service port resolves to the pod port `listener_port` (`gatewayRDSRouteName`)."""
    return f"http.{listener_port}"


def connect_cluster(authority: str) -> str:
    """The Envoy cluster istiod generates for the Service `authority` on port 22."""
    return f"outbound|{SSH_PORT}||{authority}"


def connect_domains(authority: str) -> list[str]:
    """The virtual host domains for one authority: bare (Istio gateways ignore the port) and with `:22`."""
    return [authority, f"{authority}:{SSH_PORT}"]


def namespace_hosts(namespace: str, cluster_domain: str = "cluster.local") -> tuple[str, ...]:
    """The Gateway server's hosts: `*.<namespace>.svc.<domain>`, which covers every connect authority of the
    stack (all are Services in its namespace) and stays the same as instances come and go. A VirtualService
    binds to the server only if it names the Gateway and a host there, so nothing else lands on it."""
    check_dns_label(namespace, what="namespace")
    check_dns_name(cluster_domain, what="cluster domain")
    return (cluster_dns_name("*", namespace, cluster_domain),)


@dataclass(frozen=True, kw_only=True)
class GatewayServer:
    """The Istio `Gateway` server the stack creates where the cluster has none on the CONNECT port."""

    port: int
    """The gateway Service's port (e.g. 80); istiod maps it to the pods' listener port and names the route
    configuration after that one (`http.<listener_port>`)."""
    hosts: tuple[str, ...]
    """The server's hosts (`namespace_hosts`)."""

    def __post_init__(self) -> None:
        _check_port("Gateway server port", self.port)
        if not self.hosts:
            raise ValueError("the Gateway server has no hosts: Istio needs at least one")


@dataclass(frozen=True)
class ConnectGateway:
    """The stack's CONNECT entry on an Istio ingress gateway."""

    selector: Mapping[str, str]
    """The gateway pods' labels (the EnvoyFilters' `workloadSelector`), e.g. `{istio: ingressgateway}`."""
    listener_port: int
    """The port the gateway's Envoy listens on for CONNECT (the pod/target port, e.g. 8080 behind 80)."""
    namespace: str = "istio-system"
    """The gateway's namespace: the EnvoyFilters live there, next to the pods they select."""
    enable_connect: bool = True
    """Add CONNECT to the listener's HCM. Off where it is already on: Envoy refuses a second CONNECT upgrade."""
    accept_http10: bool = False
    """Accept HTTP/1.0 requests (`nc -X connect`, socat), like Istio's `ISTIO_META_HTTP10: "1"`."""
    labels: Mapping[str, str] = field(default_factory=dict)
    """Extra labels for the EnvoyFilters' metadata (e.g. the stack's)."""
    server: GatewayServer | None = None
    """The Istio `Gateway` to create, or None where the cluster's own Gateway already opens the port."""

    def __post_init__(self) -> None:
        check_selector(self.selector)
        _check_port("gateway listener port", self.listener_port)
        check_dns_label(self.namespace, what="gateway namespace")


@dataclass(frozen=True)
class ConnectInstance:
    """One connect-mode instance: its Service `ssh-<name>` in `namespace`."""

    name: str
    namespace: str
    cluster_domain: str = "cluster.local"

    def __post_init__(self) -> None:
        connect_authority(self.name, self.namespace, self.cluster_domain)  # raises on a bad part

    @property
    def authority(self) -> str:
        return connect_authority(self.name, self.namespace, self.cluster_domain)


def _istio_object(
    api_version: str, kind: str, name: str, gateway: ConnectGateway, spec: dict[str, Any], extra: Mapping[str, str]
) -> dict[str, Any]:
    """An Istio object in the gateway's namespace, labelled as ours, with the gateway's and the `extra` labels."""
    labels = {MANAGED_BY_LABEL: MANAGED_BY, **gateway.labels, **extra}
    return {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {"name": name, "namespace": gateway.namespace, "labels": labels},
        "spec": spec,
    }


def _envoy_filter(
    name: str, gateway: ConnectGateway, patch: dict[str, Any], extra: Mapping[str, str]
) -> dict[str, Any]:
    """An EnvoyFilter of one config patch, on the gateway's pods."""
    spec = {"workloadSelector": {"labels": dict(gateway.selector)}, "configPatches": [patch]}
    return _istio_object(ENVOY_FILTER_API, "EnvoyFilter", name, gateway, spec, extra)


def gateway_connect_filter(gateway: ConnectGateway, name: str = GATEWAY_FILTER_NAME) -> dict[str, Any] | None:
    """The EnvoyFilter that turns CONNECT (and, if asked, HTTP/1.0) on in the HCM of the gateway's listener on
    `listener_port`; None when there is nothing to turn on."""
    check_dns_label(name, what="EnvoyFilter name")
    value: dict[str, Any] = {"@type": HCM_TYPE}
    if gateway.enable_connect:
        # Appended to the HCM's upgrade_configs (Istio's has websocket): the merge appends repeated fields.
        value["upgrade_configs"] = [{"upgrade_type": CONNECT_UPGRADE}]
        value["http2_protocol_options"] = {"allow_connect": True}
    if gateway.accept_http10:
        value["http_protocol_options"] = {"accept_http_10": True}
    if len(value) == 1:
        return None
    listener = {"portNumber": gateway.listener_port, "filterChain": {"filter": {"name": HCM_FILTER}}}
    patch = {
        "applyTo": "NETWORK_FILTER",
        "match": {"context": "GATEWAY", "listener": listener},
        "patch": {"operation": "MERGE", "value": {"typed_config": value}},
    }
    return _envoy_filter(name, gateway, patch, {})


def istio_gateway(gateway: ConnectGateway) -> dict[str, Any] | None:
    """The Istio `Gateway` with one plain-HTTP server on `server.port`, selecting the gateway's pods: what makes
    istiod build the listener and the route configuration the EnvoyFilters patch. None when not asked for."""
    server = gateway.server
    if server is None:
        return None
    port = {"number": server.port, "name": GATEWAY_SERVER_PORT_NAME, "protocol": "HTTP"}
    spec = {"selector": dict(gateway.selector), "servers": [{"port": port, "hosts": list(server.hosts)}]}
    return _istio_object(GATEWAY_API, "Gateway", GATEWAY_NAME, gateway, spec, {})


def instance_filter_name(instance: ConnectInstance) -> str:
    """`ssh-<instance>.<namespace>.connect`: unique per Service, a valid object name (DNS subdomain)."""
    return f"ssh-{instance.name}.{instance.namespace}.connect"


def connect_virtual_host(instance: ConnectInstance) -> dict[str, Any]:
    """The instance's virtual host, the same on an Istio gateway (added by its EnvoyFilter) and in a standalone
    Envoy's bootstrap: CONNECT to its authority (bare or `:22`) is terminated and its bytes go, as TCP, to the
    cluster `connect_cluster(authority)`."""
    authority = instance.authority
    return {
        "name": f"ssh-gateway.{authority}",
        "domains": connect_domains(authority),
        "routes": [
            {
                "name": f"ssh-{instance.name}-connect",
                "match": {"connect_matcher": {}},
                "route": {
                    "cluster": connect_cluster(authority),
                    "upgrade_configs": [{"upgrade_type": CONNECT_UPGRADE, "connect_config": {}}],
                },
            }
        ],
    }


def instance_route_filter(gateway: ConnectGateway, instance: ConnectInstance) -> dict[str, Any]:
    """The EnvoyFilter that adds the instance's virtual host to the gateway's route configuration of
    `listener_port`: CONNECT to its authority (bare or `:22`) goes to its Service's port 22."""
    patch = {
        "applyTo": "VIRTUAL_HOST",
        "match": {"context": "GATEWAY", "routeConfiguration": {"name": gateway_route_name(gateway.listener_port)}},
        "patch": {"operation": "ADD", "value": connect_virtual_host(instance)},
    }
    return _envoy_filter(instance_filter_name(instance), gateway, patch, {INSTANCE_LABEL: instance.name})


def connect_manifests(gateway: ConnectGateway, instances: Iterable[ConnectInstance]) -> list[dict[str, Any]]:
    """The EnvoyFilters: the gateway filter (if any) and one route filter per instance, after checking that no two
    instances share an authority (a repeated domain makes Envoy NACK the port's whole route configuration). The
    Istio `Gateway` (`istio_gateway`) is not among them: it is no patch."""
    manifests: list[dict[str, Any]] = []
    gateway_filter = gateway_connect_filter(gateway)
    if gateway_filter is not None:
        manifests.append(gateway_filter)
    manifests += [instance_route_filter(gateway, instance) for instance in _unique_authorities(instances)]
    return manifests


def _unique_authorities(instances: Iterable[ConnectInstance]) -> list[ConnectInstance]:
    """`instances`, after checking that no two share an authority (a domain repeated across virtual hosts makes
    Envoy refuse the whole route configuration)."""
    seen: dict[str, ConnectInstance] = {}
    for instance in instances:
        authority = instance.authority
        if authority in seen:
            raise ValueError(
                f"CONNECT authority {authority!r} is used by two instances ({seen[authority].name!r} and "
                f"{instance.name!r}): every connect-mode instance needs its own name in its namespace"
            )
        seen[authority] = instance
    return list(seen.values())


# --- a standalone Envoy (connect.gateway.kind: envoy) ------------------------------------------------------

ENVOY_DEFAULT_STREAM_IDLE_TIMEOUT = 300
"""Envoy's own default `stream_idle_timeout` (5 minutes), written out so the keepalive check can compare."""
ENVOY_LISTENER = "ssh-gateway-connect"
"""The name of the standalone Envoy's listener, and of its route configuration."""


@dataclass(frozen=True, kw_only=True)
class StandaloneEnvoy:
    """The stack's CONNECT entry on a plain Envoy the operator runs from the stack's `envoyConfig` output: no
    Istio, no EnvoyFilters, the whole configuration is ours."""

    listener_port: int
    """The port Envoy listens on for CONNECT."""
    listen_address: str = "0.0.0.0"  # noqa: S104 - a gateway listens where Pangolin's site reaches it
    """The address it binds."""
    accept_http10: bool = False
    """Accept HTTP/1.0 CONNECT (`nc -X connect`, socat); without it Envoy answers them `426 Upgrade Required`."""
    stream_idle_timeout: int = ENVOY_DEFAULT_STREAM_IDLE_TIMEOUT
    """Seconds a tunnel may stay silent before Envoy closes it (ssh's keepalive must be shorter)."""

    def __post_init__(self) -> None:
        _check_port("Envoy listener port", self.listener_port)


@dataclass(frozen=True)
class ServiceUpstream:
    """The instance's `ssh-<instance>` Service, port 22, by its cluster DNS name (the authority): an Envoy in the
    cluster resolves it."""


Upstream = ServiceUpstream | StaticTarget
"""Where a standalone Envoy opens the tunnel's TCP to: the instance's Service, or its static host:port."""


@dataclass(frozen=True)
class EnvoyRoute:
    """One connect-mode instance as a standalone Envoy routes it: its virtual host, and its cluster's upstream."""

    instance: ConnectInstance
    upstream: Upstream


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _envoy_cluster(route: EnvoyRoute) -> dict[str, Any]:
    """STATIC for an IP address; STRICT_DNS for a name (a Service's DNS name, or a static host given by name),
    since a STATIC cluster takes only addresses."""
    authority, upstream = route.instance.authority, route.upstream
    name = connect_cluster(authority)
    host, port = (upstream.host, upstream.port) if isinstance(upstream, StaticTarget) else (authority, SSH_PORT)
    address = {"socket_address": {"address": host, "port_value": port}}
    return {
        "name": name,
        "type": "STATIC" if _is_ip(host) else "STRICT_DNS",
        "connect_timeout": "5s",
        "load_assignment": {
            "cluster_name": name,
            "endpoints": [{"lb_endpoints": [{"endpoint": {"address": address}}]}],
        },
    }


def envoy_bootstrap(gateway: StandaloneEnvoy, routes: Sequence[EnvoyRoute]) -> dict[str, Any]:
    """A standalone Envoy's complete v3 bootstrap: no admin interface, one listener on `listener_port` whose HCM
    has CONNECT on, with one virtual host per instance (`connect_virtual_host`, as on Istio) and one cluster
    each. Authorities must be unique, as on Istio (Envoy refuses a repeated domain)."""
    _unique_authorities(r.instance for r in routes)  # raises on a repeated authority
    hcm: dict[str, Any] = {
        "@type": HCM_TYPE,
        "stat_prefix": ENVOY_LISTENER,
        "codec_type": "AUTO",
        "upgrade_configs": [{"upgrade_type": CONNECT_UPGRADE}],
        "http2_protocol_options": {"allow_connect": True},
        "stream_idle_timeout": f"{gateway.stream_idle_timeout}s",
        "route_config": {"name": ENVOY_LISTENER, "virtual_hosts": [connect_virtual_host(r.instance) for r in routes]},
        "http_filters": [{"name": ROUTER_FILTER, "typed_config": {"@type": ROUTER_TYPE}}],
    }
    if gateway.accept_http10:
        hcm["http_protocol_options"] = {"accept_http_10": True}
    listener = {
        "name": ENVOY_LISTENER,
        "address": {"socket_address": {"address": gateway.listen_address, "port_value": gateway.listener_port}},
        "filter_chains": [{"filters": [{"name": HCM_FILTER, "typed_config": hcm}]}],
    }
    clusters = [_envoy_cluster(r) for r in routes]
    return {"static_resources": {"listeners": [listener], "clusters": clusters}}


def envoy_bootstrap_yaml(gateway: StandaloneEnvoy, routes: Sequence[EnvoyRoute]) -> str:
    """`envoy_bootstrap` as YAML (the stack output `envoyConfig`), for `envoy --config-yaml`, or `envoy -c` from a
    file named `*.yaml`: Envoy picks the parser by the file's extension, so `-c <(...)` (no extension) reads JSON."""
    header = (
        '# ssh-gateway: this stack\'s CONNECT gateway; run: envoy --config-yaml "$(pulumi stack output envoyConfig)"\n'
    )
    return header + yaml.safe_dump(envoy_bootstrap(gateway, routes), sort_keys=False)


@dataclass(frozen=True, kw_only=True)
class PangolinEntry:
    """The CONNECT port published by Pangolin: one raw TCP resource on `port`, whose target is the gateway."""

    host: str
    """The public name clients send CONNECT to (a name of the Gerbil host)."""
    port: int
    """The public port, outside the per-instance range."""
    target_host: str
    """Where Pangolin's site reaches the gateway: its Service's cluster DNS name (or a fixed host)."""
    target_port: int
    """The gateway Service's port."""


@dataclass(frozen=True, kw_only=True)
class DirectEntry:
    """The CONNECT port published by the gateway itself (its LoadBalancer): nothing to create for it."""

    host: str
    port: int


Entry = PangolinEntry | DirectEntry
"""How the public reaches the gateway's CONNECT listener."""


def proxytunnel_command(host: str, port: int) -> str:
    """The ssh `ProxyCommand` for a connect-mode instance: proxytunnel speaks HTTP/1.1 CONNECT to `host:port`."""
    return f"proxytunnel -q -p {host}:{port} -d %h:%p"


def connect_ssh_config(*, alias: str, authority: str, user: str, entry: Entry, server_alive_interval: int) -> str:
    """The OpenSSH `Host` block of a connect-mode instance. `HostName` is the CONNECT authority (what the gateway
    routes on, sent by the ProxyCommand as `%h:%p`); `HostKeyAlias` keeps its known_hosts entry its own, since
    every instance shares the gateway's address; the keepalive outlives the gateway's stream idle timeout."""
    lines = [
        f"Host {alias}",
        f"    HostName {authority}",
        f"    Port {SSH_PORT}",
        f"    User {user}",
        f"    HostKeyAlias {alias}",
        f"    ProxyCommand {proxytunnel_command(entry.host, entry.port)}",
        f"    ServerAliveInterval {server_alive_interval}",
    ]
    return "\n".join(lines) + "\n"
