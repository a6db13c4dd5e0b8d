"""The demo's stand-in for a connect stack's ingress gateway: a real Envoy fed the EnvoyFilters the stack rendered.

The local stack has no cluster, so its Kubernetes objects are rendered to files (`kubernetes.renderDir`). The
demo hands the rendered EnvoyFilters to a real Envoy configured the way istiod configures an Istio ingress
gateway, patched by Istio's own code (`ssh_gateway.local.envoy`). How each piece maps to a cluster:

    cluster:  ssh -> proxytunnel -> Gerbil/Traefik/Newt (Pangolin resource <project>/<stack>/@connect)
              -> Service istio-ingressgateway:80 -> gateway pod :8080 (Envoy + the EnvoyFilters, from istiod)
              -> cluster outbound|22||ssh-<i>.<ns>.svc.<domain> -> pod IP:podPort (sshd)
    local:    ssh -> proxytunnel -> the emulator's data plane (the same Pangolin resource)
              -> connect.gateway.targetHost:servicePort = 127.0.0.1:listenerPort (Envoy + the same EnvoyFilters)
              -> the same cluster name -> 127.0.0.1:podPort (a loopback sshd standing in for the pod)

With no Service in front of the gateway locally, `servicePort` must equal `listenerPort`; with no pods, every
connect-mode instance's `podPort` is the loopback port of its sshd.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ssh_gateway.core.connect import ConnectGateway, DirectEntry, connect_cluster
from ssh_gateway.core.settings import ConnectServiceInstance, Settings
from ssh_gateway.ops.toolchain import REPO

from .envoy import EnvoyGateway

__all__ = ["LocalConnect", "local_connect", "rendered_envoy_filters"]

_LOOPBACK = ("127.0.0.1", "localhost")


@dataclass(frozen=True)
class LocalConnect:
    """The connect side of a local stack: the gateway Envoy plays, and the sshd behind each route."""

    gateway: ConnectGateway
    render_dir: Path
    """Where the stack renders its Kubernetes objects (its EnvoyFilters among them)."""
    upstreams: dict[str, int]
    """Envoy cluster (`outbound|22||<authority>`) -> the loopback port of the sshd standing in for the pod."""

    @property
    def sshd_ports(self) -> list[int]:
        return sorted(set(self.upstreams.values()))

    def gateway_envoy(self, directory: Path) -> EnvoyGateway:
        """The Envoy that plays the ingress gateway, with the EnvoyFilters the last `pulumi up` rendered."""
        filters = rendered_envoy_filters(self.render_dir)
        if not filters:
            raise SystemExit(f"demo: no EnvoyFilter rendered in {self.render_dir}: run pulumi up on the stack first")
        return EnvoyGateway(
            directory,
            port=self.gateway.listener_port,
            clusters=self.upstreams,
            filters=filters,
            selector=self.gateway.selector,
            namespace=self.gateway.namespace,
        )


def local_connect(settings: Settings) -> LocalConnect | None:
    """The local connect side, or None when the stack has no connect-mode instance; `SystemExit` naming the key
    when the stack cannot run on this machine."""
    connected = [i for i in settings.instances if isinstance(i, ConnectServiceInstance)]
    connect = settings.connect
    if not connected or connect is None:
        return None
    render_dir = settings.kubernetes.render_dir
    if render_dir is None:
        raise SystemExit(
            "demo: connect-mode instances need ssh-gateway:kubernetes.renderDir on this machine (there is no "
            "cluster: the demo gives Envoy the EnvoyFilters the stack renders)"
        )
    entry = settings.connect_entry()
    if isinstance(entry, DirectEntry):
        raise SystemExit("demo: ssh-gateway:connect.public.via must be pangolin (the emulator's data plane) here")
    gw = connect.gateway
    if entry.target_host not in _LOOPBACK:
        raise SystemExit(f"demo: ssh-gateway:connect.gateway.targetHost {entry.target_host} is not loopback")
    if gw.service_port != gw.listener_port:
        raise SystemExit(
            f"demo: ssh-gateway:connect.gateway.servicePort {gw.service_port} must equal listenerPort "
            f"{gw.listener_port} here (no Service maps one to the other: Envoy listens on it directly)"
        )
    upstreams = {connect_cluster(settings.connect_instance(i).authority): i.pod_port for i in connected}
    gateway = settings.connect_gateway()
    if not isinstance(gateway, ConnectGateway):
        raise SystemExit("demo: this path plays an Istio gateway (connect.gateway.kind istio)")
    # A relative renderDir is the program's: relative to the project directory.
    return LocalConnect(gateway, REPO / render_dir, upstreams)


def rendered_envoy_filters(render_dir: Path) -> list[dict[str, Any]]:
    """Every EnvoyFilter pulumi-kubernetes rendered under `render_dir`, by name."""
    found = []
    for path in sorted(render_dir.rglob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text()):
            if isinstance(document, dict) and document.get("kind") == "EnvoyFilter":
                found.append(document)
    return sorted(found, key=lambda d: str(d["metadata"]["name"]))
