"""`Settings`: all of a stack's `ssh-gateway:*` config, and the rules that span its sections.

A rule that needs two sections (the CONNECT port outside the instances' range, a nodePort instance needing
`kubernetes.nodeIp`, ...) is checked here, after each section has its shape; the domain objects the settings
translate into are built by `translate`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from pydantic import (
    Field,
    model_validator,
)

from ssh_gateway.core.connect import (
    ConnectGateway,
    ConnectInstance,
    Entry,
    EnvoyRoute,
    StandaloneEnvoy,
)
from ssh_gateway.core.firewall import Sources
from ssh_gateway.core.instance_keys import ROUTINGS
from ssh_gateway.core.nsg_fit import check_room
from ssh_gateway.core.outputs import Routing
from ssh_gateway.core.ports import EPHEMERAL, PortRange
from ssh_gateway.core.targets import ServiceSpec, StaticTarget, Target

from . import translate
from .sections import (
    NAMESPACE,
    Connect,
    ConnectModeInstance,
    ConnectStaticInstance,
    Discovery,
    EnvoyGatewaySettings,
    Firewall,
    FirewallOff,
    FirewallOn,
    Gateway,
    HostIdentity,
    HostIdentityOn,
    Instance,
    IstioGatewaySettings,
    Kubernetes,
    NodePortInstance,
    Pangolin,
    PangolinPublic,
    PortModeInstance,
    Ports,
    StrictModel,
    is_static,
    problem,
)


class Settings(StrictModel):
    """All of a stack's `ssh-gateway:*` config."""

    production: bool = False
    pangolin: Pangolin
    ports: Ports = Ports()
    gateway: Gateway
    kubernetes: Kubernetes = Kubernetes()
    firewall: Firewall = FirewallOff(enabled=False)
    host_identity: HostIdentity = Field(default=HostIdentityOn(), alias="hostIdentity")
    routing: Routing = Field(default=Routing.PORT, description="the instances' default routing")
    connect: Connect | None = None
    instances: tuple[Instance, ...] = ()
    discovery: Discovery | None = None

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
            raise problem(
                "instances",
                f"duplicate name(s) {', '.join(dupes)}; each instance needs its own name (its Service, and in "
                "connect mode its CONNECT authority, are named after it)",
            )
        self._check_connect()
        if self.discovery is not None and self.kubernetes.render_dir:
            raise problem(
                "discovery",
                "lists instances from a live cluster and writes its status there, which kubernetes.renderDir (YAML "
                "on disk, no cluster) cannot do: drop one of the two",
            )
        for index, inst in enumerate(self.instances):
            if isinstance(inst, ConnectModeInstance):
                continue
            if isinstance(inst, NodePortInstance) and self.kubernetes.render_dir and inst.node_port is None:
                raise problem(
                    f"instances[{index}].nodePort",
                    f"instance {inst.name!r} needs nodePort pinned when kubernetes.renderDir is set "
                    "(a rendered Service gets no server-assigned nodePort)",
                )
            try:
                self.target_of(inst)
            except ValueError as exc:
                raise problem(f"instances[{index}].target", str(exc)) from None
            if inst.host_key is not None and "host_key_generation" in inst.model_fields_set:
                raise problem(
                    f"instances[{index}].hostKeyGeneration",
                    f"instance {inst.name!r} pins hostKey, so it is issued no host key to rotate: drop one of the two",
                )
        port_range = self.ports.range
        if port_range is None:
            self._check_no_port_mode()
            return self
        published = self.published_range
        if published is not None and not published.covers(port_range):
            raise problem(
                "gateway.publishedRange",
                f"ports.range {port_range} is not inside gateway.publishedRange {published}: "
                "Gerbil/Traefik would not publish every allocatable port; narrow ports.range or publish more",
            )
        fw = self.firewall
        if isinstance(fw, FirewallOn):
            try:  # room from priorityBase up; the NSG's other rules are checked at preview (nsg_fit)
                check_room(fw, port_range, self.port_sources())
            except ValueError as exc:
                raise problem("firewall.priorityBase", str(exc)) from None
        return self

    def port_sources(self) -> dict[str, Sources]:
        """Who may connect to each port-mode instance: its own `sourceCidrs`, else the firewall's (firewall on)."""
        fw = self.firewall
        if not isinstance(fw, FirewallOn):
            return {}
        return {
            i.name: i.source_cidrs or fw.source_cidrs for i in self.instances if not isinstance(i, ConnectModeInstance)
        }

    def _check_no_port_mode(self) -> None:
        """Without `ports.range`, no instance may need a port of its own."""
        port_mode = [(i, inst) for i, inst in enumerate(self.instances) if not isinstance(inst, ConnectModeInstance)]
        if port_mode:
            index, inst = port_mode[0]
            raise problem(
                "ports.range",
                f"required: instance {inst.name!r} (instances[{index}]) has routing port, so it needs a public port "
                'from this range, e.g. "40000-40099"; leave it out only when every instance has routing: connect',
            )

    def _check_connect(self) -> None:
        """The CONNECT entry and the instances behind it, as Istio and Envoy will take them."""
        connected = [(i, inst) for i, inst in enumerate(self.instances) if isinstance(inst, ConnectModeInstance)]
        if self.connect is None:
            if self.routing == Routing.CONNECT:
                raise problem("routing", "connect needs ssh-gateway:connect (the gateway and its public entry)")
            if connected:
                index, inst = connected[0]
                raise problem(
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
                raise problem(f"instances[{index}].name", str(exc)) from None
            if isinstance(inst, ConnectStaticInstance) and isinstance(gateway, IstioGatewaySettings):
                raise problem(
                    f"instances[{index}].target",
                    f"instance {inst.name!r} has target static, which only connect.gateway.kind envoy routes to: an "
                    "Istio gateway routes CONNECT only to cluster Services (istiod builds no cluster for a host "
                    "outside them); set connect.gateway.kind: envoy, or leave target out (a ClusterIP Service)",
                )
        if isinstance(gateway, EnvoyGatewaySettings) and "enable_connect" in connect.model_fields_set:
            raise problem(
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
                    raise problem(
                        "connect.public.port",
                        f"{public.port} is inside {key} {ports}: the CONNECT port is one port of its own, outside "
                        "the instances' range (the allocator would hand it out too)",
                    )
        idle = gateway.idle_timeout if isinstance(gateway, EnvoyGatewaySettings) else gateway.stream_idle_timeout
        if idle is not None and connect.server_alive_interval >= idle:
            default = "" if gateway.stream_idle_timeout else " (Envoy's default)"
            raise problem(
                "connect.serverAliveInterval",
                f"{connect.server_alive_interval} is not below connect.gateway.streamIdleTimeout {idle}{default}: the "
                f"gateway would close an idle session before ssh's keepalive; use at most {idle - 1}",
            )

    def connect_gateway(self) -> ConnectGateway | StandaloneEnvoy:
        """The gateway of the CONNECT entry (`translate.connect_gateway`)."""
        # Discovery's namespaces, not its instances': the Gateway stays the same as instances come and go.
        own = {i.namespace for i in self.instances if isinstance(i, ConnectModeInstance) and i.namespace}
        discovered = set(self.discovery.namespaces) if self.discovery is not None else set()
        return translate.connect_gateway(self._connect(), self.kubernetes, own | discovered)

    def connect_instance(self, inst: ConnectModeInstance) -> ConnectInstance:
        """The instance as the gateway routes to it (`translate.connect_instance`)."""
        return translate.connect_instance(inst, self.kubernetes)

    def connect_target(self, inst: ConnectModeInstance) -> ServiceSpec | StaticTarget:
        """Where the gateway reaches the instance's sshd (`translate.connect_target`)."""
        return translate.connect_target(inst, self.kubernetes)

    def envoy_routes(self) -> list[EnvoyRoute]:
        """Every connect-mode instance as a standalone Envoy routes it (`translate.envoy_routes`)."""
        return translate.envoy_routes(self.instances, self.kubernetes)

    def connect_entry(self) -> Entry:
        """How the public reaches the gateway (`translate.connect_entry`)."""
        return translate.connect_entry(self._connect(), self.gateway, self.kubernetes)

    def _connect(self) -> Connect:
        if self.connect is None:
            raise ValueError("the stack has no ssh-gateway:connect")
        return self.connect

    def needs_kubernetes(self) -> bool:
        """Whether the stack registers any Kubernetes object: a Service (every target but static) or, behind an
        Istio gateway, the EnvoyFilters; with `discovery`, the status ConfigMap."""
        istio = self.connect is not None and isinstance(self.connect.gateway, IstioGatewaySettings)
        objects = any(not is_static(i) or self.delivers_secret(i) for i in self.instances)
        return istio or self.discovery is not None or objects

    def target_of(self, inst: PortModeInstance) -> Target:
        """Where the instance's Pangolin target points (`translate.target_of`)."""
        return translate.target_of(inst, self.kubernetes)

    def issues_host_key(self, inst: Instance) -> bool:
        """Whether the program issues the instance a host key and certificate: host identity is on and no
        `hostKey` is pinned (a pinned key keeps the plain known_hosts line, as before)."""
        return isinstance(self.host_identity, HostIdentityOn) and inst.host_key is None

    def delivers_secret(self, inst: Instance) -> bool:
        """Whether the issued identity goes into a Kubernetes Secret next to the instance's Service: not for a
        static target without a `namespace` (the operator writes it with `ssh-gateway host-identity`), nor when
        manifests are rendered to disk (a rendered Secret is a private key in plaintext on disk)."""
        beside = not is_static(inst) or inst.namespace is not None
        return self.issues_host_key(inst) and beside and not self.kubernetes.render_dir

    def namespace_of(self, inst: Instance) -> str:
        """The instance's namespace (`translate.namespace_of`)."""
        return translate.namespace_of(inst, self.kubernetes)

    @property
    def status_namespace(self) -> str:
        """Where the stack's status ConfigMap is: `discovery.statusNamespace`, else `kubernetes.namespace`."""
        found = self.discovery.status_namespace if self.discovery is not None else None
        return found or self.kubernetes.namespace

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
        undelivered = [
            i.name for i in self.instances if self.issues_host_key(i) and (not is_static(i) or i.namespace is not None)
        ]
        if self.kubernetes.render_dir and undelivered:
            yield (
                f"{NAMESPACE}:kubernetes.renderDir is set, so the host-key Secrets of {', '.join(undelivered)} are not "
                "rendered (they would be private keys in plaintext on disk): create them from the files "
                "`ssh-gateway host-identity --instance NAME --write DIR` derives (docs/host-identity.md)"
            )
