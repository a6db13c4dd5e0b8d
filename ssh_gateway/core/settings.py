"""Stack settings: every `ssh-gateway:*` config key as one pydantic model, validated before any resource exists.

Values are parsed once here (a port range into a `PortRange`, sources into `Cidrs | ServiceTag`, an instance
into the shape its `routing` and `target` call for, the CONNECT entry and its gateway into the shapes their
`via` and `kind` call for) and
passed on typed. `parse_settings` reports every problem at once,
each naming the config key, the value and what is allowed, with a "did you mean" for a misspelt key.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Annotated, Any, Final, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    PlainValidator,
    Tag,
    ValidationError,
    ValidationInfo,
    model_validator,
)
from pydantic_core import PydanticCustomError

from .addresses import check_host, check_hostname, check_http_url
from .connect import (
    ENVOY_DEFAULT_STREAM_IDLE_TIMEOUT,
    ConnectGateway,
    ConnectInstance,
    DirectEntry,
    Entry,
    EnvoyRoute,
    GatewayServer,
    PangolinEntry,
    ServiceUpstream,
    StandaloneEnvoy,
    check_selector,
    namespace_hosts,
)
from .credentials import API_KEY_CONFIG
from .firewall import (
    AZURE_PRIORITY_MAX,
    AZURE_PRIORITY_MIN,
    DEFAULT_PRIORITY_BASE,
    Sources,
    check_priorities,
    connect_priority,
    parse_sources,
)
from .host_identity import MAX_VALID_DAYS
from .names import CONNECT_ENTRY, public_host
from .ports import EPHEMERAL, PortRange
from .targets import ClusterIpTarget, NodePortTarget, ServiceSpec, StaticTarget, Target, service_spec

__all__ = [
    "NAMESPACE",
    "ROUTINGS",
    "ClusterIpInstance",
    "Connect",
    "ConnectModeInstance",
    "ConnectServiceInstance",
    "ConnectStaticInstance",
    "DirectPublic",
    "EnvoyGatewaySettings",
    "FirewallOff",
    "FirewallOn",
    "HostCa",
    "HostIdentityOff",
    "HostIdentityOn",
    "Instance",
    "IstioGatewaySettings",
    "NodePortInstance",
    "PangolinPublic",
    "PortModeInstance",
    "Routing",
    "Settings",
    "SettingsError",
    "StaticInstance",
    "decode_config",
    "parse_settings",
]

NAMESPACE: Final = "ssh-gateway"

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


def _selector(value: dict[str, str]) -> dict[str, str]:
    check_selector(value)
    return value


def _port_range(value: object) -> PortRange:
    return value if isinstance(value, PortRange) else PortRange.parse(value)


def _sources(value: object) -> Sources:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, Sequence) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{value!r} is not a list of CIDRs such as [203.0.113.0/24]")
    return parse_sources(list(value))


DnsLabel = Annotated[str, AfterValidator(_dns_label)]
Host = Annotated[str, AfterValidator(check_host)]
Port = Annotated[int, Field(ge=1, le=65535)]
Generation = Annotated[int, Field(ge=1, le=2**31 - 1)]
Range = Annotated[PortRange, PlainValidator(_port_range)]
SourceList = Annotated[Sources, PlainValidator(_sources)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class Ports(_Model):
    """`ssh-gateway:ports`: the public port range instances are allocated from; only a stack with an instance of
    routing port needs one (connect-mode instances share the CONNECT port)."""

    range: Range | None = Field(default=None, description='"start-end", inclusive, e.g. "40000-40099"')
    reserved: tuple[Port, ...] = ()


class Pangolin(_Model):
    """`ssh-gateway:pangolin`: where the gateway's Integration API is. The key is `pangolin:apiKey` (secret)."""

    url: Annotated[str, AfterValidator(check_http_url)] = Field(description="e.g. https://api.example.com/v1")
    org_id: Annotated[str, AfterValidator(_org_id)] = Field(alias="orgId")
    site_id: int = Field(alias="siteId", ge=1)


class Kubernetes(_Model):
    """`ssh-gateway:kubernetes`: where the instances' SSH Services go."""

    namespace: DnsLabel = "default"
    render_dir: str | None = Field(default=None, alias="renderDir", description="render YAML instead of applying")
    kubeconfig: str | None = None
    context: str | None = None
    node_ip: Host | None = Field(default=None, alias="nodeIp", description="target of NodePort instances")
    cluster_domain: Annotated[str, AfterValidator(check_hostname)] = Field(
        default="cluster.local", alias="clusterDomain"
    )
    skip_await: bool = Field(default=False, alias="skipAwait", description="only for control-plane-only clusters")


class FirewallOff(_Model):
    """`ssh-gateway:firewall` with `enabled: false`: no NSG rules (the local stack)."""

    enabled: Literal[False]


class FirewallOn(_Model):
    """`ssh-gateway:firewall`: one Azure NSG inbound rule per allocated port."""

    enabled: Literal[True] = True
    resource_group: Annotated[str, AfterValidator(_azure_name)] = Field(alias="resourceGroup")
    nsg_name: Annotated[str, AfterValidator(_azure_name)] = Field(alias="nsgName")
    source_cidrs: SourceList = Field(alias="sourceCidrs")
    priority_base: int = Field(
        default=DEFAULT_PRIORITY_BASE, alias="priorityBase", ge=AZURE_PRIORITY_MIN, le=AZURE_PRIORITY_MAX
    )


def _enabled_tag(value: Any) -> str:
    enabled = value.get("enabled", True) if isinstance(value, Mapping) else getattr(value, "enabled", True)
    return "off" if enabled is False else "on"


Firewall = Annotated[Annotated[FirewallOn, Tag("on")] | Annotated[FirewallOff, Tag("off")], Discriminator(_enabled_tag)]


class HostCa(_Model):
    """`ssh-gateway:hostIdentity.ca`: the SSH host CA generations published in knownHosts, and the signer.

    A rotation with overlap is three `up`s: publish `[1, 2]`, sign with 2, publish `[2]` (docs/host-identity.md).
    """

    generations: tuple[Generation, ...] = (1,)
    signing: Generation | None = Field(default=None, description="default: the last of generations")

    @model_validator(mode="after")
    def _signing_is_published(self) -> HostCa:
        key = "hostIdentity.ca"
        if not self.generations:
            raise _problem(f"{key}.generations", "is empty: publish at least one CA generation, e.g. [1]")
        dupes = sorted({g for g in self.generations if self.generations.count(g) > 1})
        if dupes:
            raise _problem(f"{key}.generations", f"lists {', '.join(map(str, dupes))} twice; each generation once")
        if self.signing is not None and self.signing not in self.generations:
            raise _problem(
                f"{key}.signing",
                f"{self.signing} is not one of {key}.generations {list(self.generations)}: sign with a published CA",
            )
        return self

    @property
    def signer(self) -> int:
        """The generation that signs the certificates: `signing`, else the last published one."""
        return self.signing if self.signing is not None else self.generations[-1]


class HostIdentityOn(_Model):
    """`ssh-gateway:hostIdentity`: each instance gets a host key and a certificate from the stack's SSH host CA."""

    enabled: Literal[True] = True
    valid_days: int = Field(default=365, alias="validDays", ge=1, le=MAX_VALID_DAYS)
    ca: HostCa = HostCa()


class HostIdentityOff(_Model):
    """`ssh-gateway:hostIdentity` with `enabled: false`: no keys issued (only pinned `hostKey`s are published)."""

    enabled: Literal[False]


HostIdentity = Annotated[
    Annotated[HostIdentityOn, Tag("on")] | Annotated[HostIdentityOff, Tag("off")], Discriminator(_enabled_tag)
]


class Gateway(_Model):
    """`ssh-gateway:gateway`: the public side that Pangolin's Gerbil and Traefik publish (not owned here)."""

    host_template: Annotated[str, AfterValidator(_host_template)] = Field(
        alias="hostTemplate", description='public name, e.g. "ssh-{instance}.example.com"'
    )
    published_range: Range | None = Field(default=None, alias="publishedRange", description="default ports.range")


ROUTINGS: Final = ("port", "connect")
Routing = Literal["port", "connect"]
"""How the public reaches an instance: a public port of its own, or HTTP CONNECT through the stack's entry."""

User = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9._-]{0,31}$")]
HostKey = Annotated[str, AfterValidator(_host_key)]


class _InstanceBase(_Model):
    name: DnsLabel
    routing: Literal["port"] = "port"
    user: User = "root"
    port: Port | None = Field(default=None, description="pin the public port")
    source_cidrs: SourceList | None = Field(default=None, alias="sourceCidrs")
    host_key: HostKey | None = Field(default=None, alias="hostKey")
    host_key_generation: Generation = Field(
        default=1, alias="hostKeyGeneration", description="bump to rotate the instance's issued host key"
    )


class _ServiceInstance(_InstanceBase):
    selector: dict[str, str] | None = Field(default=None, description='pod selector; default {"app": name}')
    pod_port: Port = Field(default=22, alias="podPort")


class NodePortInstance(_ServiceInstance):
    """An instance reached at the node's IP and its Service's nodePort (the default target)."""

    target: Literal["nodePort"] = "nodePort"
    node_port: Annotated[int, Field(ge=30000, le=32767)] | None = Field(default=None, alias="nodePort")


class ClusterIpInstance(_ServiceInstance):
    """An instance reached at its Service's cluster DNS name (a Newt site inside the cluster)."""

    target: Literal["clusterIp"]


class StaticInstance(_InstanceBase):
    """An instance at a fixed host:port (a VM, or any host outside Kubernetes)."""

    target: Literal["static"]
    static_host: Host = Field(alias="staticHost")
    static_port: Port = Field(alias="staticPort")


_NO_PUBLIC_PORT: Final = (
    "a connect-mode instance has no public port of its own (it is reached through ssh-gateway:connect)"
)
_PORT_MODE_KEYS: Final = {
    "port": ("port", _NO_PUBLIC_PORT),
    "node_port": ("nodePort", _NO_PUBLIC_PORT),
    "source_cidrs": ("sourceCidrs", "connect-mode instances share the CONNECT port's one rule (firewall.sourceCidrs)"),
}


def _port_mode_only(value: object, info: ValidationInfo) -> None:
    """A key of port-mode instances, set on a connect-mode one: refused with what to do instead."""
    if value is not None:
        key, why = _PORT_MODE_KEYS[str(info.field_name)]
        raise ValueError(f"{key} is only for routing: port; {why}")


def _static_only(value: object, info: ValidationInfo) -> None:
    """staticHost/staticPort on a connect-mode instance whose target is its Service."""
    if value is not None:
        key = {"static_host": "staticHost", "static_port": "staticPort"}[str(info.field_name)]
        raise ValueError(
            f"{key} is only for target: static; this connect-mode instance is reached through its Service (set "
            "target: static, behind connect.gateway.kind envoy, to reach staticHost:staticPort instead)"
        )


def _connect_target(value: str | None) -> None:
    if value not in (None, "clusterIp"):
        raise ValueError(
            f"target {value!r} needs routing: port; a connect-mode instance is a ClusterIP Service behind the "
            "gateway (leave target out) or, behind connect.gateway.kind envoy, target: static"
        )


PortModeOnly = Annotated[object, AfterValidator(_port_mode_only)]
StaticOnly = Annotated[object, AfterValidator(_static_only)]


class _ConnectInstanceBase(_Model):
    name: DnsLabel
    routing: Literal["connect"]
    user: User = "root"
    host_key: HostKey | None = Field(default=None, alias="hostKey")
    host_key_generation: Generation = Field(
        default=1, alias="hostKeyGeneration", description="bump to rotate the instance's issued host key"
    )
    port: PortModeOnly = None
    node_port: PortModeOnly = Field(default=None, alias="nodePort")
    source_cidrs: PortModeOnly = Field(default=None, alias="sourceCidrs")


class ConnectServiceInstance(_ConnectInstanceBase):
    """An instance behind the stack's CONNECT entry: a ClusterIP Service and the gateway's route to it."""

    selector: Annotated[dict[str, str], AfterValidator(_selector)] | None = Field(
        default=None, description='pod selector; default {"app": name}'
    )
    pod_port: Port = Field(default=22, alias="podPort")
    target: Annotated[str | None, AfterValidator(_connect_target)] = None
    static_host: StaticOnly = Field(default=None, alias="staticHost")
    static_port: StaticOnly = Field(default=None, alias="staticPort")


class ConnectStaticInstance(_ConnectInstanceBase):
    """An instance behind the stack's CONNECT entry at a fixed host:port, which only a standalone Envoy
    (`connect.gateway.kind: envoy`) routes to: no Kubernetes object at all."""

    target: Literal["static"]
    static_host: Host = Field(alias="staticHost", description="where the gateway reaches the instance's sshd")
    static_port: Port = Field(alias="staticPort")


ConnectModeInstance = ConnectServiceInstance | ConnectStaticInstance
"""An instance reached through the stack's CONNECT entry (no public port of its own)."""


TARGETS: Final = ("nodePort", "clusterIp", "static")
_CONNECT_TAG: Final = "routing=connect"
_CONNECT_STATIC_TAG: Final = "routing=connect,target=static"


def _instance_tag(value: Any) -> str | None:
    """The union member an instance is: by its `routing` (the stack default filled in), then by its `target`."""
    fields: Mapping[str, Any] = value if isinstance(value, Mapping) else vars(value)
    routing = fields.get("routing", "port")
    if routing == "connect":
        return _CONNECT_STATIC_TAG if fields.get("target") == "static" else _CONNECT_TAG
    if routing != "port":
        return None  # an unknown routing: `_describe` names it
    return str(fields.get("target", "nodePort"))


PortModeInstance = NodePortInstance | ClusterIpInstance | StaticInstance
"""An instance with a public port of its own."""

Instance = Annotated[
    Annotated[NodePortInstance, Tag("nodePort")]
    | Annotated[ClusterIpInstance, Tag("clusterIp")]
    | Annotated[StaticInstance, Tag("static")]
    | Annotated[ConnectServiceInstance, Tag(_CONNECT_TAG)]
    | Annotated[ConnectStaticInstance, Tag(_CONNECT_STATIC_TAG)],
    Discriminator(
        _instance_tag,
        custom_error_type="unknown_instance_kind",
        custom_error_message=f"unknown target; allowed: {', '.join(TARGETS)}",
    ),
]


class _GatewaySettings(_Model):
    listener_port: Port = Field(default=8080, alias="listenerPort", description="the port Envoy listens on")
    target_host: Host | None = Field(default=None, alias="targetHost", description="where Pangolin's site reaches it")
    stream_idle_timeout: int | None = Field(
        default=None, alias="streamIdleTimeout", ge=1, description="the gateway's stream idle timeout in seconds"
    )


class IstioGatewaySettings(_GatewaySettings):
    """`ssh-gateway:connect.gateway` with `kind: istio` (the default): the Istio ingress gateway that terminates
    CONNECT, patched by EnvoyFilters (defaults: Istio's own `istio-ingressgateway`, Service port 80 in front of
    the pods' 8080). `targetHost` defaults to the Service's cluster DNS name; `streamIdleTimeout` is the one the
    gateway has, if any (not set by this program). `createGateway` is off by default: on most clusters an Istio
    `Gateway` already has an HTTP server on port 80 of the ingress gateway, and a second one there would merge
    into the same route configuration, owned by two parties."""

    kind: Literal["istio"] = "istio"
    namespace: DnsLabel = "istio-system"
    selector: Annotated[dict[str, str], AfterValidator(_selector)] = Field(
        default_factory=lambda: {"istio": "ingressgateway"}, description="the gateway pods' labels"
    )
    service: DnsLabel = Field(default="istio-ingressgateway", description="the gateway's Service")
    service_port: Port = Field(default=80, alias="servicePort", description="its port in front of listenerPort")
    create_gateway: bool = Field(
        default=False,
        alias="createGateway",
        description="create an Istio Gateway with an HTTP server on servicePort (off: the cluster's own has one)",
    )


class EnvoyGatewaySettings(_GatewaySettings):
    """`ssh-gateway:connect.gateway` with `kind: envoy`: a plain Envoy the operator runs with the stack's
    `envoyConfig` output (no Istio, no EnvoyFilters). Pangolin targets `targetHost:servicePort`; `servicePort`
    defaults to `listenerPort` (set it when something maps another port to Envoy's). `streamIdleTimeout` is
    written into the config (default Envoy's own, 300)."""

    kind: Literal["envoy"]
    target_host: Host = Field(alias="targetHost", description="where Pangolin's site reaches Envoy")
    service_port: Port | None = Field(default=None, alias="servicePort", description="default listenerPort")
    listen_address: Host = Field(default="0.0.0.0", alias="listenAddress", description="the address Envoy binds")  # noqa: S104

    @property
    def idle_timeout(self) -> int:
        """The stream idle timeout the config gives Envoy."""
        return self.stream_idle_timeout or ENVOY_DEFAULT_STREAM_IDLE_TIMEOUT


KINDS: Final = ("istio", "envoy")


def _tagged_by(key: str, choices: tuple[str, ...], error_type: str) -> Discriminator:
    """The union member by `key` (default: the first choice), tagged `key=value`; an unknown value is an
    `error_type` error listing the choices (`_describe` adds the "did you mean")."""

    def tag(value: Any) -> str:
        found = value.get(key, choices[0]) if isinstance(value, Mapping) else getattr(value, key, choices[0])
        return f"{key}={found}"

    return Discriminator(
        tag, custom_error_type=error_type, custom_error_message=f"unknown {key}; allowed: {', '.join(choices)}"
    )


ConnectGatewaySettings = Annotated[
    Annotated[IstioGatewaySettings, Tag("kind=istio")] | Annotated[EnvoyGatewaySettings, Tag("kind=envoy")],
    _tagged_by("kind", KINDS, "unknown_gateway_kind"),
]
"""`ssh-gateway:connect.gateway`: what terminates CONNECT, tagged by its `kind`."""


class PangolinPublic(_Model):
    """`ssh-gateway:connect.public` with `via: pangolin`: one Pangolin TCP resource on `port` to the gateway."""

    via: Literal["pangolin"] = "pangolin"
    port: Port
    host: Host | None = Field(default=None, description='default gateway.hostTemplate with {instance} = "connect"')


class DirectPublic(_Model):
    """`ssh-gateway:connect.public` with `via: direct`: the gateway's own LoadBalancer address, no Pangolin."""

    via: Literal["direct"]
    host: Host
    port: Port


VIAS: Final = ("pangolin", "direct")

Public = Annotated[
    Annotated[PangolinPublic, Tag("via=pangolin")] | Annotated[DirectPublic, Tag("via=direct")],
    _tagged_by("via", VIAS, "unknown_via"),
]


class Connect(_Model):
    """`ssh-gateway:connect`: the stack's one CONNECT entry, through which every connect-mode instance is reached."""

    gateway: ConnectGatewaySettings = IstioGatewaySettings()
    enable_connect: bool = Field(
        default=True,
        alias="enableConnect",
        description="turn CONNECT on in the Istio gateway (off where it already is); kind istio only",
    )
    accept_http10: bool = Field(default=False, alias="acceptHttp10", description="accept nc -X connect, socat")
    server_alive_interval: int = Field(default=60, alias="serverAliveInterval", ge=1, le=3600)
    public: Public


class Settings(_Model):
    """All of a stack's `ssh-gateway:*` config."""

    production: bool = False
    pangolin: Pangolin
    ports: Ports = Ports()
    gateway: Gateway
    kubernetes: Kubernetes = Kubernetes()
    firewall: Firewall = FirewallOff(enabled=False)
    host_identity: HostIdentity = Field(default=HostIdentityOn(), alias="hostIdentity")
    routing: Routing = Field(default="port", description="the instances' default routing")
    connect: Connect | None = None
    instances: tuple[Instance, ...] = ()

    @model_validator(mode="before")
    @classmethod
    def _default_routing(cls, data: Any) -> Any:
        """Each instance without a `routing` of its own takes the stack's, before the union picks its shape."""
        if not isinstance(data, Mapping) or data.get("routing", "port") not in ROUTINGS:
            return data
        instances = data.get("instances")
        if not isinstance(instances, list | tuple):
            return data
        routing = data.get("routing", "port")
        filled = [{"routing": routing, **i} if isinstance(i, Mapping) else i for i in instances]
        return {**data, "instances": filled}

    @model_validator(mode="after")
    def _consistent(self) -> Settings:
        names = [i.name for i in self.instances]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise _problem(
                "instances",
                f"duplicate name(s) {', '.join(dupes)}; each instance needs its own name (its Service, and in "
                "connect mode its CONNECT authority, are named after it)",
            )
        self._check_connect()
        for index, inst in enumerate(self.instances):
            if isinstance(inst, ConnectModeInstance):
                continue
            if isinstance(inst, NodePortInstance) and self.kubernetes.render_dir and inst.node_port is None:
                raise _problem(
                    f"instances[{index}].nodePort",
                    f"instance {inst.name!r} needs nodePort pinned when kubernetes.renderDir is set "
                    "(a rendered Service gets no server-assigned nodePort)",
                )
            try:
                self.target_of(inst)
            except ValueError as exc:
                raise _problem(f"instances[{index}].target", str(exc)) from None
            if inst.host_key is not None and "host_key_generation" in inst.model_fields_set:
                raise _problem(
                    f"instances[{index}].hostKeyGeneration",
                    f"instance {inst.name!r} pins hostKey, so it is issued no host key to rotate: drop one of the two",
                )
        port_range = self.ports.range
        if port_range is None:
            self._check_no_port_mode()
            return self
        published = self.published_range
        if published is not None and not published.covers(port_range):
            raise _problem(
                "gateway.publishedRange",
                f"ports.range {port_range} is not inside gateway.publishedRange {published}: "
                "Gerbil/Traefik would not publish every allocatable port; narrow ports.range or publish more",
            )
        if isinstance(self.firewall, FirewallOn):
            try:
                check_priorities(port_range, self.firewall.priority_base)
            except ValueError as exc:
                raise _problem("firewall.priorityBase", str(exc)) from None
        return self

    def _check_no_port_mode(self) -> None:
        """Without `ports.range`, no instance may need a port of its own."""
        port_mode = [(i, inst) for i, inst in enumerate(self.instances) if not isinstance(inst, ConnectModeInstance)]
        if port_mode:
            index, inst = port_mode[0]
            raise _problem(
                "ports.range",
                f"required: instance {inst.name!r} (instances[{index}]) has routing port, so it needs a public port "
                'from this range, e.g. "40000-40099"; leave it out only when every instance has routing: connect',
            )

    def _check_connect(self) -> None:
        """The CONNECT entry and the instances behind it, as Istio and Envoy will take them."""
        connected = [(i, inst) for i, inst in enumerate(self.instances) if isinstance(inst, ConnectModeInstance)]
        if self.connect is None:
            if self.routing == "connect":
                raise _problem("routing", "connect needs ssh-gateway:connect (the gateway and its public entry)")
            if connected:
                index, inst = connected[0]
                raise _problem(
                    f"instances[{index}].routing",
                    f"instance {inst.name!r} has routing connect, so set ssh-gateway:connect (the gateway and its "
                    "public entry), or use routing: port",
                )
            return
        connect = self.connect
        gateway = connect.gateway
        for index, inst in connected:
            try:
                self.connect_instance(inst)
            except ValueError as exc:
                raise _problem(f"instances[{index}].name", str(exc)) from None
            if isinstance(inst, ConnectStaticInstance) and isinstance(gateway, IstioGatewaySettings):
                raise _problem(
                    f"instances[{index}].target",
                    f"instance {inst.name!r} has target static, which only connect.gateway.kind envoy routes to: an "
                    "Istio gateway routes CONNECT only to cluster Services (istiod builds no cluster for a host "
                    "outside them); set connect.gateway.kind: envoy, or leave target out (a ClusterIP Service)",
                )
        if isinstance(gateway, EnvoyGatewaySettings) and "enable_connect" in connect.model_fields_set:
            raise _problem(
                "connect.enableConnect",
                "is only for connect.gateway.kind istio (a shared Istio gateway may have CONNECT on already); a "
                "standalone Envoy runs the stack's own envoyConfig, which always has CONNECT on: drop the key",
            )
        # Unique names in one namespace make unique authorities (the duplicate-name check above), which Envoy
        # requires: a domain repeated across virtual hosts NACKs the port's whole route configuration.
        public = connect.public
        if isinstance(public, PangolinPublic):
            for key, ports in (("ports.range", self.ports.range), ("gateway.publishedRange", self.published_range)):
                if ports is not None and public.port in ports:
                    raise _problem(
                        "connect.public.port",
                        f"{public.port} is inside {key} {ports}: the CONNECT port is one port of its own, outside "
                        "the instances' range (the allocator would hand it out too)",
                    )
            if isinstance(self.firewall, FirewallOn):
                try:
                    connect_priority(self.ports.range, self.firewall.priority_base)
                except ValueError as exc:
                    raise _problem("firewall.priorityBase", str(exc)) from None
        idle = gateway.idle_timeout if isinstance(gateway, EnvoyGatewaySettings) else gateway.stream_idle_timeout
        if idle is not None and connect.server_alive_interval >= idle:
            default = "" if gateway.stream_idle_timeout else " (Envoy's default)"
            raise _problem(
                "connect.serverAliveInterval",
                f"{connect.server_alive_interval} is not below connect.gateway.streamIdleTimeout {idle}{default}: the "
                f"gateway would close an idle session before ssh's keepalive; use at most {idle - 1}",
            )

    def connect_gateway(self) -> ConnectGateway | StandaloneEnvoy:
        """The gateway of the CONNECT entry: the Istio gateway the EnvoyFilters select and match, or the
        standalone Envoy whose whole config the stack outputs."""
        if self.connect is None:
            raise ValueError("the stack has no ssh-gateway:connect")
        gw = self.connect.gateway
        if isinstance(gw, EnvoyGatewaySettings):
            return StandaloneEnvoy(
                listener_port=gw.listener_port,
                listen_address=gw.listen_address,
                accept_http10=self.connect.accept_http10,
                stream_idle_timeout=gw.idle_timeout,
            )
        kube = self.kubernetes
        server = GatewayServer(port=gw.service_port, hosts=namespace_hosts(kube.namespace, kube.cluster_domain))
        return ConnectGateway(
            selector=dict(gw.selector),
            listener_port=gw.listener_port,
            namespace=gw.namespace,
            enable_connect=self.connect.enable_connect,
            accept_http10=self.connect.accept_http10,
            server=server if gw.create_gateway else None,
        )

    def connect_instance(self, inst: ConnectModeInstance) -> ConnectInstance:
        """The instance as the gateway routes to it: its authority, the cluster DNS name of its Service in the
        stack's namespace and cluster domain (for a static target, behind a standalone Envoy, only a routing name
        that need not resolve)."""
        return ConnectInstance(inst.name, self.kubernetes.namespace, self.kubernetes.cluster_domain)

    def connect_target(self, inst: ConnectModeInstance) -> ServiceSpec | StaticTarget:
        """Where the gateway reaches the instance's sshd: its ClusterIP Service `ssh-<instance>`, or a static
        host:port."""
        if isinstance(inst, ConnectStaticInstance):
            return StaticTarget(host=inst.static_host, port=inst.static_port)
        kube = self.kubernetes
        return service_spec(inst.name, kube.namespace, inst.selector, inst.pod_port, skip_await=kube.skip_await)

    def envoy_routes(self) -> list[EnvoyRoute]:
        """Every connect-mode instance as a standalone Envoy routes it: its authority and its upstream."""
        routes = []
        for inst in self.instances:
            if isinstance(inst, ConnectModeInstance):
                target = self.connect_target(inst)
                upstream = target if isinstance(target, StaticTarget) else ServiceUpstream()
                routes.append(EnvoyRoute(self.connect_instance(inst), upstream))
        return routes

    def connect_entry(self) -> Entry:
        """How the public reaches the gateway: a Pangolin resource to it, or the gateway's own address."""
        if self.connect is None:
            raise ValueError("the stack has no ssh-gateway:connect")
        public, gw = self.connect.public, self.connect.gateway
        if isinstance(public, DirectPublic):
            return DirectEntry(host=public.host, port=public.port)
        host = public.host or public_host(self.gateway.host_template, CONNECT_ENTRY)
        if isinstance(gw, EnvoyGatewaySettings):
            return PangolinEntry(
                host=host, port=public.port, target_host=gw.target_host, target_port=gw.service_port or gw.listener_port
            )
        service_host = f"{gw.service}.{gw.namespace}.svc.{self.kubernetes.cluster_domain}"
        return PangolinEntry(
            host=host, port=public.port, target_host=gw.target_host or service_host, target_port=gw.service_port
        )

    def needs_kubernetes(self) -> bool:
        """Whether the stack registers any Kubernetes object: a Service (every target but static) or, behind an
        Istio gateway, the EnvoyFilters."""
        istio = self.connect is not None and isinstance(self.connect.gateway, IstioGatewaySettings)
        return istio or any(not _is_static(i) for i in self.instances)

    def target_of(self, inst: PortModeInstance) -> Target:
        """Where the instance's Pangolin target points, with the cluster's settings filled in."""
        kube = self.kubernetes
        if isinstance(inst, StaticInstance):
            return StaticTarget(host=inst.static_host, port=inst.static_port)
        service = service_spec(inst.name, kube.namespace, inst.selector, inst.pod_port, skip_await=kube.skip_await)
        if isinstance(inst, ClusterIpInstance):
            return ClusterIpTarget(service=service, cluster_domain=kube.cluster_domain)
        if kube.node_ip is None:
            raise ValueError(f"instance {inst.name!r} has target nodePort, so set kubernetes.nodeIp (or use clusterIp)")
        return NodePortTarget(service=service, node_ip=kube.node_ip, node_port=inst.node_port)

    def issues_host_key(self, inst: Instance) -> bool:
        """Whether the program issues the instance a host key and certificate: host identity is on and no
        `hostKey` is pinned (a pinned key keeps the plain known_hosts line, as before)."""
        return isinstance(self.host_identity, HostIdentityOn) and inst.host_key is None

    def delivers_secret(self, inst: Instance) -> bool:
        """Whether the issued identity goes into a Kubernetes Secret next to the instance's Service: not for a
        static target (the operator installs it from `hostIdentities`), nor when manifests are rendered to disk
        (a rendered Secret is a private key in plaintext on disk)."""
        return self.issues_host_key(inst) and not _is_static(inst) and not self.kubernetes.render_dir

    @property
    def published_range(self) -> PortRange | None:
        """The ports the gateway publishes: `gateway.publishedRange`, else `ports.range` (None: neither is set)."""
        return self.gateway.published_range or self.ports.range

    def warnings(self) -> Iterator[str]:
        """What is allowed but likely to hurt, one line each, naming the key."""
        if self.ports.range is not None and self.ports.range.overlaps(EPHEMERAL):
            yield (
                f"{NAMESPACE}:ports.range {self.ports.range} overlaps Linux's ephemeral ports {EPHEMERAL} "
                "(net.ipv4.ip_local_port_range): the gateway host's own outgoing connections can take a port "
                "before Gerbil binds it; prefer a range below 32768"
            )
        public = self.connect.public if self.connect else None
        if isinstance(public, PangolinPublic) and public.port in EPHEMERAL:
            yield (
                f"{NAMESPACE}:connect.public.port {public.port} is one of Linux's ephemeral ports {EPHEMERAL}: an "
                "outgoing connection of the gateway host can take it before Gerbil binds it; prefer one below 32768"
            )
        undelivered = [i.name for i in self.instances if self.issues_host_key(i) and not _is_static(i)]
        if self.kubernetes.render_dir and undelivered:
            yield (
                f"{NAMESPACE}:kubernetes.renderDir is set, so the host-key Secrets of {', '.join(undelivered)} are not "
                "rendered (they would be private keys in plaintext on disk): create them from the secret output "
                "hostIdentities (docs/host-identity.md)"
            )


def _is_static(inst: Instance) -> bool:
    """A static target, in either routing: no Service, no Kubernetes object."""
    return isinstance(inst, StaticInstance | ConnectStaticInstance)


def _problem(key: str, message: str) -> PydanticCustomError:
    """A cross-field problem whose message starts with the key it is about (see `_key_of`)."""
    return PydanticCustomError("settings", "{key}: {message}", {"key": key, "message": message})


class SettingsError(ValueError):
    """Config that cannot be used; the message lists every problem, each naming its key and value."""


_TAGS: Final = frozenset(
    {*TARGETS, "on", "off", _CONNECT_TAG, _CONNECT_STATIC_TAG, "via=pangolin", "via=direct", "kind=istio", "kind=envoy"}
)
_TARGET_MODELS: Final[tuple[type[BaseModel], ...]] = (NodePortInstance, ClusterIpInstance, StaticInstance)
"""The port-mode instance models, in the order of `TARGETS`."""
_SECTIONS: Final[Mapping[str, tuple[type[BaseModel], ...]]] = {
    "": (Settings,),
    "ports": (Ports,),
    "pangolin": (Pangolin,),
    "kubernetes": (Kubernetes,),
    "firewall": (FirewallOn,),
    "gateway": (Gateway,),
    "hostIdentity": (HostIdentityOn,),
    "hostIdentity.ca": (HostCa,),
    "instances": (*_TARGET_MODELS, ConnectServiceInstance, ConnectStaticInstance),
    "connect": (Connect,),
    "connect.gateway": (IstioGatewaySettings, EnvoyGatewaySettings),
    "connect.public": (PangolinPublic, DirectPublic),
}


def _keys_at(loc: Sequence[int | str], models: tuple[type[BaseModel], ...] | None = None) -> list[str]:
    """The keys allowed where `loc` (an unknown key's location) points, or in the given models."""
    section = ".".join(p for p in loc[:-1] if isinstance(p, str) and p not in _TAGS and not p.startswith("function-"))
    models = _SECTIONS.get(section, ()) if models is None else models
    return sorted({str(f.alias or n) for model in models for n, f in model.model_fields.items()})


_KINDS: Final[Mapping[str, type[BaseModel]]] = {"istio": IstioGatewaySettings, "envoy": EnvoyGatewaySettings}
_KIND_WHY: Final = {
    "istio": "an Istio gateway is patched by EnvoyFilters, where the stack's own Envoy config does not apply",
    "envoy": "a standalone Envoy has no Istio: no selector, namespace or Service of its own",
}


def _unknown_key(loc: Sequence[int | str]) -> str:
    """ "unknown key", with the key meant, or the targets (gateway kinds) a key belongs to when it is another's."""
    key = str(loc[-1])
    tag = next((p for p in loc if isinstance(p, str) and p in TARGETS), None)
    if tag is not None and key in _keys_at(loc):
        owners = [t for t, m in zip(TARGETS, _TARGET_MODELS, strict=True) if key in _keys_at(loc, (m,))]
        return f"not a key of target {tag}; it belongs to target {' and '.join(owners)}"
    if _CONNECT_STATIC_TAG in loc and key in _keys_at(loc, (ConnectServiceInstance,)):
        return "not a key of target static; a static connect-mode instance is at staticHost:staticPort (no Service)"
    kind = next((p.removeprefix("kind=") for p in loc if isinstance(p, str) and p.startswith("kind=")), None)
    if kind is not None:
        others = [k for k, m in _KINDS.items() if k != kind and key in _keys_at(loc, (m,))]
        if others:
            return f"only for connect.gateway.kind {others[0]}; {_KIND_WHY[kind]}"
    return f"unknown key{_did_you_mean(key, _keys_at(loc))}"


def _without_tags(loc: Sequence[int | str]) -> list[int | str]:
    """The location without pydantic's union tags."""
    out: list[int | str] = []
    for index, part in enumerate(loc):
        after = loc[index - 1] if index else None
        # A target's tag follows an instance's index; on/off (firewall, hostIdentity) and the `name=value` tags
        # (routing=connect, via=...) are never field names.
        tag = isinstance(part, str) and (
            part in ("on", "off") or "=" in part or (part in _TAGS and isinstance(after, int))
        )
        if not tag and not (isinstance(part, str) and part.startswith("function-")):
            out.append(part)
    return out


def _key(loc: Sequence[int | str]) -> str:
    """`('instances', 2, 'static', 'staticHost')` -> `ssh-gateway:instances[2].staticHost` (union tags dropped)."""
    parts = _without_tags(loc)
    out = f"{NAMESPACE}:{parts[0]}" if parts else NAMESPACE
    for part in parts[1:]:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def _value_at(raw: Any, loc: Sequence[int | str]) -> Any:
    for part in _without_tags(loc):
        try:
            raw = raw[part]
        except (KeyError, IndexError, TypeError):
            return None
    return raw


def _did_you_mean(word: str, choices: Sequence[str]) -> str:
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def _describe(err: Any, raw: Mapping[str, Any]) -> str:
    loc = tuple(err["loc"])
    message = str(err["msg"]).removeprefix("Value error, ")
    if err["type"] == "settings":  # a cross-field problem names its own key
        key, _, message = message.partition(": ")
        return f"{NAMESPACE}:{key}: {message}"
    value = _value_at(raw, loc)
    if err["type"] == "extra_forbidden" and "off" in loc:  # e.g. hostIdentity: {enabled: false, validDays: 30}
        return f"{_key(loc)}: not allowed with enabled: false"
    if err["type"] == "extra_forbidden":
        return f"{_key(loc)}: {_unknown_key(loc)}"
    if err["type"] == "unknown_instance_kind":
        routing = _value_at(raw, (*loc, "routing"))
        if routing is not None and routing not in ROUTINGS:
            allowed = f"unknown routing; allowed: {', '.join(ROUTINGS)}"
            return f"{_key(loc)}.routing = {json.dumps(routing)}: {allowed}{_did_you_mean(str(routing), ROUTINGS)}"
        target = _value_at(raw, (*loc, "target"))
        return f"{_key(loc)}.target = {json.dumps(target)}: {message}{_did_you_mean(str(target), TARGETS)}"
    if err["type"] == "unknown_gateway_kind":
        kind = _value_at(raw, (*loc, "kind"))
        return f"{_key(loc)}.kind = {json.dumps(kind)}: {message}{_did_you_mean(str(kind), KINDS)}"
    if err["type"] == "unknown_via":
        via = _value_at(raw, (*loc, "via"))
        return f"{_key(loc)}.via = {json.dumps(via)}: {message}{_did_you_mean(str(via), VIAS)}"
    if err["type"] == "missing":
        return f"{_key(loc)}: required, but not set"
    shown = f" = {json.dumps(value)}" if value is not None else ""
    return f"{_key(loc)}{shown}: {message}"


def parse_settings(raw: Mapping[str, Any]) -> Settings:
    """Validates the `ssh-gateway:*` config (keys without the namespace, values already JSON-decoded)."""
    try:
        return Settings.model_validate(dict(raw))
    except ValidationError as exc:
        problems = [_describe(err, raw) for err in exc.errors()]
        raise SettingsError("invalid stack config:\n  " + "\n  ".join(dict.fromkeys(problems))) from None


def decode_config(config: Mapping[str, str]) -> dict[str, Any]:
    """Pulumi's flat config (`"ssh-gateway:ports" -> JSON text`) -> this namespace, decoded.

    A key of the `pangolin` namespace other than `pangolin:apiKey` is refused here: it is a typo.
    """
    unknown = sorted(k for k in config if k.startswith("pangolin:") and k != API_KEY_CONFIG)
    if unknown:
        hint = _did_you_mean(unknown[0], [API_KEY_CONFIG])
        raise SettingsError(f"invalid stack config:\n  {unknown[0]}: unknown key{hint}")
    prefix = f"{NAMESPACE}:"
    out: dict[str, Any] = {}
    for key, text in config.items():
        if key.startswith(prefix):
            try:
                out[key[len(prefix) :]] = json.loads(text)
            except (json.JSONDecodeError, TypeError):
                out[key[len(prefix) :]] = text
    return out
