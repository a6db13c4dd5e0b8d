"""The sections of the settings: one pydantic model per `ssh-gateway:*` key and per shape of an instance,
a CONNECT gateway and a CONNECT entry, each tagged by the field that picks it (`routing`, `target`, `kind`,
`via`, `enabled`). Checks that span two sections are `schema.Settings`'s.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Final, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    PlainValidator,
    Tag,
    ValidationInfo,
    model_validator,
)
from pydantic_core import PydanticCustomError

from ssh_gateway.core.addresses import check_hostname, check_http_url
from ssh_gateway.core.connect import (
    ENVOY_DEFAULT_STREAM_IDLE_TIMEOUT,
    check_selector,
)
from ssh_gateway.core.fields import AzureName, DnsLabel, Generation, Host, HostKey, HostTemplate, OrgId, Port, User
from ssh_gateway.core.firewall import (
    AZURE_PRIORITY_MAX,
    AZURE_PRIORITY_MIN,
    DEFAULT_PRIORITY_BASE,
    RuleDesign,
    Sources,
    parse_sources,
)
from ssh_gateway.core.host_identity import MAX_VALID_DAYS
from ssh_gateway.core.instance_keys import TARGETS
from ssh_gateway.core.names import DiscoverFrom
from ssh_gateway.core.outputs import GatewayKind, Routing, Via
from ssh_gateway.core.ports import PortRange

NAMESPACE: Final = "ssh-gateway"
"""The config namespace of every key here."""


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


Range = Annotated[PortRange, PlainValidator(_port_range)]
SourceList = Annotated[Sources, PlainValidator(_sources)]


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class Ports(StrictModel):
    """`ssh-gateway:ports`: the public port range instances are allocated from; only a stack with an instance of
    routing port needs one (connect-mode instances share the CONNECT port)."""

    range: Range | None = Field(default=None, description='"start-end", inclusive, e.g. "40000-40099"')
    reserved: tuple[Port, ...] = ()


class Pangolin(StrictModel):
    """`ssh-gateway:pangolin`: where the gateway's Integration API is. The key is `pangolin:apiKey` (secret)."""

    url: Annotated[str, AfterValidator(check_http_url)] = Field(description="e.g. https://api.example.com/v1")
    org_id: OrgId = Field(alias="orgId")
    site_id: int = Field(alias="siteId", ge=1)


class Kubernetes(StrictModel):
    """`ssh-gateway:kubernetes`: where the instances' SSH Services go."""

    namespace: DnsLabel = "default"
    render_dir: str | None = Field(default=None, alias="renderDir", description="render YAML instead of applying")
    kubeconfig: str | None = None
    context: str | None = None
    node_ip: Host | None = Field(default=None, alias="nodeIp", description="target of NodePort instances")
    cluster_domain: Annotated[str, AfterValidator(check_hostname)] = Field(
        default="cluster.local", alias="clusterDomain"
    )


class FirewallOff(StrictModel):
    """`ssh-gateway:firewall` with `enabled: false`: no NSG rules (the local stack)."""

    enabled: Literal[False]


class FirewallOn(StrictModel):
    """`ssh-gateway:firewall`: the Azure NSG inbound rules that open the allocated ports (`core/firewall.py`)."""

    enabled: Literal[True] = True
    resource_group: AzureName = Field(alias="resourceGroup")
    nsg_name: AzureName = Field(alias="nsgName")
    source_cidrs: SourceList = Field(alias="sourceCidrs")
    priority_base: int = Field(
        default=DEFAULT_PRIORITY_BASE, alias="priorityBase", ge=AZURE_PRIORITY_MIN, le=AZURE_PRIORITY_MAX
    )
    rules: RuleDesign = Field(
        default=RuleDesign.MERGED, description="one rule per set of sources (merged), or one per instance"
    )


def _enabled_tag(value: Any) -> str:
    enabled = value.get("enabled", True) if isinstance(value, Mapping) else getattr(value, "enabled", True)
    return "off" if enabled is False else "on"


Firewall = Annotated[Annotated[FirewallOn, Tag("on")] | Annotated[FirewallOff, Tag("off")], Discriminator(_enabled_tag)]


class HostCa(StrictModel):
    """`ssh-gateway:hostIdentity.ca`: the SSH host CA generations published in knownHosts, and the signer.

    A rotation with overlap is three `up`s: publish `[1, 2]`, sign with 2, publish `[2]` (docs/host-identity.md).
    """

    generations: tuple[Generation, ...] = (1,)
    signing: Generation | None = Field(default=None, description="default: the last of generations")

    @model_validator(mode="after")
    def _signing_is_published(self) -> HostCa:
        key = "hostIdentity.ca"
        if not self.generations:
            raise problem(f"{key}.generations", "is empty: publish at least one CA generation, e.g. [1]")
        dupes = sorted({g for g in self.generations if self.generations.count(g) > 1})
        if dupes:
            raise problem(f"{key}.generations", f"lists {', '.join(map(str, dupes))} twice; each generation once")
        if self.signing is not None and self.signing not in self.generations:
            raise problem(
                f"{key}.signing",
                f"{self.signing} is not one of {key}.generations {list(self.generations)}: sign with a published CA",
            )
        return self

    @property
    def signer(self) -> int:
        """The generation that signs the certificates: `signing`, else the last published one."""
        return self.signing if self.signing is not None else self.generations[-1]


class HostIdentityOn(StrictModel):
    """`ssh-gateway:hostIdentity`: each instance gets a host key and a certificate from the stack's SSH host CA."""

    enabled: Literal[True] = True
    valid_days: int = Field(default=365, alias="validDays", ge=1, le=MAX_VALID_DAYS)
    ca: HostCa = HostCa()


class HostIdentityOff(StrictModel):
    """`ssh-gateway:hostIdentity` with `enabled: false`: no keys issued (only pinned `hostKey`s are published)."""

    enabled: Literal[False]


HostIdentity = Annotated[
    Annotated[HostIdentityOn, Tag("on")] | Annotated[HostIdentityOff, Tag("off")], Discriminator(_enabled_tag)
]


class Gateway(StrictModel):
    """`ssh-gateway:gateway`: the public side that Pangolin's Gerbil and Traefik publish (not owned here)."""

    host_template: HostTemplate = Field(
        alias="hostTemplate", description='public name, e.g. "ssh-{instance}.example.com"'
    )
    published_range: Range | None = Field(default=None, alias="publishedRange", description="default ports.range")


_NAMESPACE_HELP: Final = (
    "the namespace of its Service and host-key Secret (default kubernetes.namespace); on a static target, where "
    "its host-key Secret is delivered (none without it)"
)


class _InstanceBase(StrictModel):
    name: DnsLabel
    routing: Literal["port"] = "port"
    namespace: DnsLabel | None = Field(default=None, description=_NAMESPACE_HELP)
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


class _ConnectInstanceBase(StrictModel):
    name: DnsLabel
    routing: Literal["connect"]
    namespace: DnsLabel | None = Field(default=None, description=_NAMESPACE_HELP)
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


CONNECT_TAG: Final = "routing=connect"
CONNECT_STATIC_TAG: Final = "routing=connect,target=static"


def _instance_tag(value: Any) -> str | None:
    """The union member an instance is: by its `routing` (the stack default filled in), then by its `target`."""
    fields: Mapping[str, Any] = value if isinstance(value, Mapping) else vars(value)
    routing = fields.get("routing", Routing.PORT)
    if routing == Routing.CONNECT:
        return CONNECT_STATIC_TAG if fields.get("target") == "static" else CONNECT_TAG
    if routing != Routing.PORT:
        return None  # an unknown routing: `_describe` names it
    return str(fields.get("target", "nodePort"))


PortModeInstance = NodePortInstance | ClusterIpInstance | StaticInstance
"""An instance with a public port of its own."""

Instance = Annotated[
    Annotated[NodePortInstance, Tag("nodePort")]
    | Annotated[ClusterIpInstance, Tag("clusterIp")]
    | Annotated[StaticInstance, Tag("static")]
    | Annotated[ConnectServiceInstance, Tag(CONNECT_TAG)]
    | Annotated[ConnectStaticInstance, Tag(CONNECT_STATIC_TAG)],
    Discriminator(
        _instance_tag,
        custom_error_type="unknown_instance_kind",
        custom_error_message=f"unknown target; allowed: {', '.join(TARGETS)}",
    ),
]


INSTANCE_MODELS: Final[tuple[type[BaseModel], ...]] = (
    NodePortInstance,
    ClusterIpInstance,
    StaticInstance,
    ConnectServiceInstance,
    ConnectStaticInstance,
)
"""Every shape an instance can have, port-mode targets first (in the order of `TARGETS`)."""


class _GatewaySettings(StrictModel):
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


KINDS: Final = tuple(k.value for k in GatewayKind)


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


class PangolinPublic(StrictModel):
    """`ssh-gateway:connect.public` with `via: pangolin`: one Pangolin TCP resource on `port` to the gateway."""

    via: Literal["pangolin"] = "pangolin"
    port: Port
    host: Host | None = Field(default=None, description='default gateway.hostTemplate with {instance} = "connect"')


class DirectPublic(StrictModel):
    """`ssh-gateway:connect.public` with `via: direct`: the gateway's own LoadBalancer address, no Pangolin."""

    via: Literal["direct"]
    host: Host
    port: Port


VIAS: Final = tuple(v.value for v in Via)

Public = Annotated[
    Annotated[PangolinPublic, Tag("via=pangolin")] | Annotated[DirectPublic, Tag("via=direct")],
    _tagged_by("via", VIAS, "unknown_via"),
]


class Connect(StrictModel):
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


def _discovery_selector(value: dict[str, str]) -> dict[str, str]:
    if not value:
        raise ValueError(
            "is empty: give at least one label the selected objects carry, e.g. {ssh-gateway.io/expose: 'true'} (an "
            "empty selector would take every object in the namespaces)"
        )
    check_selector(value)
    return value


def _label_key(value: str) -> str:
    try:
        check_selector({value: ""})
    except ValueError:
        raise ValueError(f"{value!r} is not a Kubernetes label key ([prefix/]name, name 1-63 characters)") from None
    return value


def _unique_namespaces(value: tuple[str, ...]) -> tuple[str, ...]:
    if not value:
        raise ValueError("is empty: list at least one namespace to discover instances in, e.g. [gpu-users]")
    dupes = sorted({n for n in value if value.count(n) > 1})
    if dupes:
        raise ValueError(f"lists {', '.join(dupes)} twice; each namespace once")
    return value


DISCOVER_FROM: Final = tuple(f.value for f in DiscoverFrom)

MAX_GRACE_PERIOD: Final = 30 * 24 * 3600
"""A month: a longer grace keeps a gone instance's port for longer than anyone waits for a pod to come back."""


class Discovery(StrictModel):
    """`ssh-gateway:discovery`: instances discovered from the cluster at each run, beside `instances`
    (docs/cluster-instances.md). Without it, the stack has the configured instances only."""

    from_: DiscoverFrom = Field(alias="from", description="services (the platform's own, not owned) or pods")
    namespaces: Annotated[tuple[DnsLabel, ...], AfterValidator(_unique_namespaces)]
    selector: Annotated[dict[str, str], AfterValidator(_discovery_selector)] = Field(
        description="equality label selector, every pair must match"
    )
    name_label: Annotated[str, AfterValidator(_label_key)] | None = Field(
        default=None, alias="nameLabel", description="the label whose value names the instance; default the object's"
    )
    grace_period: int = Field(
        default=600,
        alias="gracePeriod",
        ge=0,
        le=MAX_GRACE_PERIOD,
        description="seconds a gone object keeps its instance",
    )
    max_removals: int = Field(
        default=5, alias="maxRemovals", ge=0, description="removals past this in one run are held back, not done"
    )
    status_namespace: DnsLabel | None = Field(
        default=None, alias="statusNamespace", description="the status ConfigMap's namespace; default kubernetes'"
    )


def is_static(inst: Instance) -> bool:
    """A static target, in either routing: no Service, no Kubernetes object."""
    return isinstance(inst, StaticInstance | ConnectStaticInstance)


def problem(key: str, message: str) -> PydanticCustomError:
    """A cross-field problem whose message starts with the key it is about (`errors._describe` reads it)."""
    return PydanticCustomError("settings", "{key}: {message}", {"key": key, "message": message})
