"""The CONNECT vocabulary: every instance behind one gateway port, SSH inside an HTTP CONNECT tunnel.

The client runs `ssh` with `HostName <authority>` and `ProxyCommand proxytunnel -p <gateway> -d %h:%p`; the
Istio ingress gateway (Envoy) terminates `CONNECT <authority>:22`, picks the route by the authority and
opens raw TCP to the instance's Service `ssh-<instance>` on port 22 (cluster `outbound|22||<authority>`,
the name istiod gives that Service's cluster). This module only builds the Istio manifests, as plain dicts;
it imports nothing from Pulumi.

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
  `routeConfigurationMatch` (for gateways: port number through the gateway's target-port map, port name,
  gateway), leaving every other virtual host and every setting in place. Removing an instance removes only
  its EnvoyFilter, hence only its virtual host.

Domains: Istio sets `ignore_port_in_host_matching: true` on gateway route configurations
(`pilot/pkg/networking/core/gateway.go`, `buildGatewayRoutesFromServers`), so Envoy strips the port of
`CONNECT host:22` before matching and a domain `host:22` alone never matches (the seed's `svc...local:80` is
a 404 there). Each virtual host lists both `authority` (what matches on Istio gateways) and `authority:22`
(what matches where ports are not ignored). Envoy refuses a route configuration in which a domain repeats
across virtual hosts, and a refused (NACKed) RDS update takes every route of that port with it, so
authorities must be unique across the stack: `connect_manifests` checks that.

Ports: the listener match compares `portNumber` with the port the gateway's Envoy listener binds, i.e. the
gateway pod's (target) port, e.g. 8080 behind Service port 80 (`listener_patch.go`, `listenerMatch`); the
route configuration match accepts either (`rc_patch.go`, `anyPortMatches`). `listener_port` is therefore
the pod port. The gateway also needs an Istio `Gateway` with an HTTP server on that port, or istiod builds
no listener and no route configuration for these filters to patch.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .names import service_name

__all__ = [
    "CONNECT_UPGRADE",
    "HCM_FILTER",
    "HCM_TYPE",
    "SSH_PORT",
    "ConnectGateway",
    "ConnectInstance",
    "connect_authority",
    "connect_cluster",
    "connect_domains",
    "connect_manifests",
    "gateway_connect_filter",
    "instance_filter_name",
    "instance_route_filter",
]

SSH_PORT = 22
"""The port of every instance's `ssh-<instance>` Service, and the `%p` of the client's CONNECT target."""
CONNECT_UPGRADE = "CONNECT"
HCM_FILTER = "envoy.filters.network.http_connection_manager"
HCM_TYPE = "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager"
ENVOY_FILTER_API = "networking.istio.io/v1alpha3"
MANAGED_BY = {"app.kubernetes.io/managed-by": "ssh-gateway"}

_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
# Kubernetes label values (and the name part of keys): up to 63 of [A-Za-z0-9_.-], alphanumeric at both ends.
_LABEL_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")


def _check_dns_label(what: str, value: str, max_length: int = 63) -> None:
    if not isinstance(value, str) or len(value) > max_length or not _DNS_LABEL.fullmatch(value):
        raise ValueError(
            f"{what} {value!r} is not a DNS label: 1-{max_length} of a-z, 0-9 and '-', starting and ending "
            "with a letter or digit"
        )


def _check_dns_name(what: str, value: str) -> None:
    if not isinstance(value, str) or not value or len(value) > 253:
        raise ValueError(f"{what} {value!r} is not a DNS name: dot-separated DNS labels, 1-253 characters")
    for label in value.split("."):
        if len(label) > 63 or not _DNS_LABEL.fullmatch(label):
            raise ValueError(f"{what} {value!r} is not a DNS name: label {label!r} is not a DNS label")


def _check_port(what: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 65535:
        raise ValueError(f"{what} {value!r} is not a port: an integer 1-65535")


def _check_selector(selector: Mapping[str, str]) -> None:
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
        _check_dns_name("prefix", prefix)
    except ValueError:
        return True
    return False


def connect_authority(instance: str, namespace: str, cluster_domain: str = "cluster.local") -> str:
    """`ssh-<instance>.<namespace>.svc.<cluster_domain>`: the cluster DNS name of the instance's Service, which
    the client sends as its CONNECT authority (ssh `HostName`) and the gateway routes on."""
    _check_dns_label("instance name", instance, max_length=59)  # ssh-<instance> must stay a DNS label
    _check_dns_label("namespace", namespace)
    _check_dns_name("cluster domain", cluster_domain)
    return f"{service_name(instance)}.{namespace}.svc.{cluster_domain}"


def connect_cluster(authority: str) -> str:
    """The Envoy cluster istiod generates for the Service `authority` on port 22."""
    return f"outbound|{SSH_PORT}||{authority}"


def connect_domains(authority: str) -> list[str]:
    """The virtual host domains for one authority: bare (Istio gateways ignore the port) and with `:22`."""
    return [authority, f"{authority}:{SSH_PORT}"]


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

    def __post_init__(self) -> None:
        _check_selector(self.selector)
        _check_port("gateway listener port", self.listener_port)
        _check_dns_label("gateway namespace", self.namespace)


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


def _metadata(name: str, gateway: ConnectGateway, extra: Mapping[str, str]) -> dict[str, Any]:
    return {"name": name, "namespace": gateway.namespace, "labels": {**MANAGED_BY, **gateway.labels, **extra}}


def gateway_connect_filter(gateway: ConnectGateway, name: str = "ssh-gateway-connect") -> dict[str, Any] | None:
    """The EnvoyFilter that turns CONNECT (and, if asked, HTTP/1.0) on in the HCM of the gateway's listener on
    `listener_port`; None when there is nothing to turn on."""
    _check_dns_label("EnvoyFilter name", name)
    value: dict[str, Any] = {"@type": HCM_TYPE}
    if gateway.enable_connect:
        # Appended to the HCM's upgrade_configs (Istio's has websocket): the merge appends repeated fields.
        value["upgrade_configs"] = [{"upgrade_type": CONNECT_UPGRADE}]
        value["http2_protocol_options"] = {"allow_connect": True}
    if gateway.accept_http10:
        value["http_protocol_options"] = {"accept_http_10": True}
    if len(value) == 1:
        return None
    return {
        "apiVersion": ENVOY_FILTER_API,
        "kind": "EnvoyFilter",
        "metadata": _metadata(name, gateway, {}),
        "spec": {
            "workloadSelector": {"labels": dict(gateway.selector)},
            "configPatches": [
                {
                    "applyTo": "NETWORK_FILTER",
                    "match": {
                        "context": "GATEWAY",
                        "listener": {
                            "portNumber": gateway.listener_port,
                            "filterChain": {"filter": {"name": HCM_FILTER}},
                        },
                    },
                    "patch": {"operation": "MERGE", "value": {"typed_config": value}},
                }
            ],
        },
    }


def instance_filter_name(instance: ConnectInstance) -> str:
    """`ssh-<instance>.<namespace>.connect`: unique per Service, a valid object name (DNS subdomain)."""
    return f"ssh-{instance.name}.{instance.namespace}.connect"


def instance_route_filter(gateway: ConnectGateway, instance: ConnectInstance) -> dict[str, Any]:
    """The EnvoyFilter that adds the instance's virtual host to the gateway's route configuration of
    `listener_port`: CONNECT to its authority (bare or `:22`) goes to its Service's port 22."""
    authority = instance.authority
    virtual_host = {
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
    return {
        "apiVersion": ENVOY_FILTER_API,
        "kind": "EnvoyFilter",
        "metadata": _metadata(instance_filter_name(instance), gateway, {"ssh-gateway/instance": instance.name}),
        "spec": {
            "workloadSelector": {"labels": dict(gateway.selector)},
            "configPatches": [
                {
                    "applyTo": "VIRTUAL_HOST",
                    "match": {"context": "GATEWAY", "routeConfiguration": {"portNumber": gateway.listener_port}},
                    "patch": {"operation": "ADD", "value": virtual_host},
                }
            ],
        },
    }


def connect_manifests(gateway: ConnectGateway, instances: Iterable[ConnectInstance]) -> list[dict[str, Any]]:
    """The gateway filter (if any) and one route filter per instance, after checking that no two instances
    share an authority (a repeated domain makes Envoy NACK the port's whole route configuration)."""
    seen: dict[str, ConnectInstance] = {}
    manifests: list[dict[str, Any]] = []
    gateway_filter = gateway_connect_filter(gateway)
    if gateway_filter is not None:
        manifests.append(gateway_filter)
    for instance in instances:
        authority = instance.authority
        if authority in seen:
            raise ValueError(
                f"CONNECT authority {authority!r} is used by two instances ({seen[authority].name!r} and "
                f"{instance.name!r}): every connect-mode instance needs its own name in its namespace"
            )
        seen[authority] = instance
        manifests.append(instance_route_filter(gateway, instance))
    return manifests
