"""What the doctor checks and what it found: endpoints from the stack's outputs, checks, and the verdict."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ssh_gateway.core.names import connect_resource_name, pangolin_resource_name, ssh_alias
from ssh_gateway.core.outputs import DEFAULT_GATEWAY_KIND, DEFAULT_VIA, GatewayKind, Routing, Via, parse_stack_outputs
from ssh_gateway.core.trust import lookup_key, parse_known_hosts

__all__ = ["LAYERS", "Check", "Endpoint", "InstanceReport", "Status", "endpoints_from_outputs"]

Status = Literal["ok", "fail", "warn", "skip"]
"""ok: passed; fail: this layer is broken; warn: could not be checked; skip: not reached or not applicable."""

LAYERS = ("dns", "tcp", "connect", "banner", "hostidentity", "hostkey", "pangolin")
"""The checks, in the order they run: along the path from the client to sshd, then Pangolin's own view.
`connect` (the gateway answers the instance's HTTP CONNECT) is only on connect-mode instances' paths;
`hostidentity` checks an issued certificate, `hostkey` a pinned key; an instance has one or the other."""


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
    host_key_alias: str | None = None
    """The `HostKeyAlias` of the instance's ssh config block: the name its certificate must carry."""
    trusted_cas: tuple[str, ...] = ()
    """The CA keys of the stack's `@cert-authority` lines that cover the instance, as ssh looks them up."""
    routing: Routing = Routing.PORT
    """`port`: `host:port` is the instance's own; `connect`: it is the stack's CONNECT entry."""
    authority: str | None = None
    """A connect-mode instance's CONNECT authority (its ssh HostName)."""
    route: str | None = None
    """Where a connect-mode instance's route is: its EnvoyFilter `<namespace>/<name>`, or its virtual host in the
    standalone Envoy's config, `envoyConfig/<virtual host>`."""
    gateway_kind: GatewayKind = DEFAULT_GATEWAY_KIND
    """A connect-mode instance's gateway: `istio` (EnvoyFilters on an ingress gateway) or `envoy` (a standalone
    Envoy running the stack's envoyConfig)."""
    accept_http10: bool = False
    """The stack turns HTTP/1.0 CONNECT on (`nc -X connect`): the doctor checks that the gateway accepts it."""
    via: Via | None = None
    """A connect-mode instance's entry: `pangolin` (a Pangolin resource to check) or `direct`."""

    @property
    def alias(self) -> str:
        """The HostKeyAlias ssh uses, else the instance's ssh alias (what a connect-mode block always sets)."""
        return self.host_key_alias or ssh_alias(self.instance)

    @property
    def lookup(self) -> str:
        """What ssh searches known_hosts for: the alias, else `[host]:port`."""
        return lookup_key(self.host, self.port, self.host_key_alias)

    @property
    def principal(self) -> str:
        """The name ssh matches the certificate's principals against: the alias, else the host."""
        return self.host_key_alias or self.host


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


def host_key_aliases(ssh_config: str) -> dict[str, str]:
    """`Host` alias -> its `HostKeyAlias`, from the stack's `sshConfig` output (one block per instance)."""
    aliases: dict[str, str] = {}
    host = None
    for line in ssh_config.splitlines():
        fields = line.split()
        if len(fields) == 2 and fields[0].lower() == "host":
            host = fields[1]
        elif len(fields) == 2 and fields[0].lower() == "hostkeyalias" and host is not None:
            aliases[host] = fields[1]
    return aliases


def endpoints_from_outputs(outputs: Mapping[str, Any], *, project: str, stack: str) -> list[Endpoint]:
    """The instances of a stack from its outputs (`endpoints`, `knownHosts`, `sshConfig`, `connect`), in name
    order.

    Each one's pinned key and trusted CAs are the `knownHosts` lines that ssh, using the instance's ssh config
    block, would look up for it.
    """
    read = parse_stack_outputs(outputs)
    known_hosts = parse_known_hosts(read.known_hosts)
    aliases = host_key_aliases(read.ssh_config)
    endpoints = []
    for name, ep in read.endpoints.items():
        connected = ep.routing is Routing.CONNECT
        # A connect-mode block always sets HostKeyAlias ssh-<instance>: every such instance shares the entry.
        alias = aliases.get(ssh_alias(name)) or (ssh_alias(name) if connected else None)
        lookup = lookup_key(ep.host, ep.port, alias)
        matching = [entry for entry in known_hosts if entry.matches(lookup)]
        common: dict[str, Any] = {
            "instance": name,
            "host": ep.host,
            "port": ep.port,
            "user": ep.user,
            "resource_id": ep.pangolin_resource_id,
            "pinned_key": next((e.key for e in matching if not e.marker), None),
            "host_key_alias": alias,
            "trusted_cas": tuple(e.key for e in matching if e.marker == "@cert-authority"),
        }
        if connected:
            connect = read.connect
            if ep.authority is None:
                raise ValueError(f"endpoints.{name}: a connect-mode endpoint without its authority")
            endpoint = Endpoint(
                **common,
                expected_name=connect_resource_name(project, stack),
                routing=Routing.CONNECT,
                authority=ep.authority,
                route=ep.route,
                accept_http10=connect.accept_http10 if connect else False,
                via=connect.via if connect else DEFAULT_VIA,
                gateway_kind=connect.gateway_kind if connect else DEFAULT_GATEWAY_KIND,
            )
        else:
            endpoint = Endpoint(**common, expected_name=pangolin_resource_name(project, stack, name))
        endpoints.append(endpoint)
    return endpoints
