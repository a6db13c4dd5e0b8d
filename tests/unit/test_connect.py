"""Unit tests for the CONNECT vocabulary (ssh_gateway/core/connect.py): manifest shapes and refused input."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from ssh_gateway.core.connect import (
    HCM_FILTER,
    HCM_TYPE,
    ROUTER_TYPE,
    ConnectGateway,
    ConnectInstance,
    EnvoyRoute,
    GatewayServer,
    ServiceUpstream,
    StandaloneEnvoy,
    connect_authority,
    connect_cluster,
    connect_domains,
    connect_manifests,
    connect_virtual_host,
    envoy_bootstrap,
    envoy_bootstrap_yaml,
    gateway_connect_filter,
    instance_route_filter,
    istio_gateway,
    namespace_hosts,
)
from ssh_gateway.core.targets import StaticTarget

pytestmark = pytest.mark.unit

GATEWAY = ConnectGateway(selector={"istio": "ingressgateway"}, listener_port=8080)


def only_patch(manifest: dict[str, Any]) -> dict[str, Any]:
    patches = manifest["spec"]["configPatches"]
    assert len(patches) == 1
    return dict(patches[0])


def test_authority_is_the_service_dns_name() -> None:
    assert connect_authority("gpu-alice", "dev") == "ssh-gpu-alice.dev.svc.cluster.local"
    assert connect_authority("a", "ns", "corp.internal") == "ssh-a.ns.svc.corp.internal"
    assert connect_cluster("ssh-a.ns.svc.cluster.local") == "outbound|22||ssh-a.ns.svc.cluster.local"
    assert connect_domains("ssh-a.ns.svc.cluster.local") == [
        "ssh-a.ns.svc.cluster.local",
        "ssh-a.ns.svc.cluster.local:22",
    ]


def test_gateway_filter_merges_connect_into_the_listener_hcm() -> None:
    manifest = gateway_connect_filter(GATEWAY)
    assert manifest is not None
    assert manifest["apiVersion"] == "networking.istio.io/v1alpha3"
    assert manifest["kind"] == "EnvoyFilter"
    assert manifest["metadata"]["namespace"] == "istio-system"
    assert manifest["spec"]["workloadSelector"] == {"labels": {"istio": "ingressgateway"}}
    patch = only_patch(manifest)
    assert patch["applyTo"] == "NETWORK_FILTER"
    assert patch["match"] == {
        "context": "GATEWAY",
        "listener": {"portNumber": 8080, "filterChain": {"filter": {"name": HCM_FILTER}}},
    }
    assert patch["patch"]["operation"] == "MERGE"
    assert patch["patch"]["value"]["typed_config"] == {
        "@type": HCM_TYPE,
        "upgrade_configs": [{"upgrade_type": "CONNECT"}],
        "http2_protocol_options": {"allow_connect": True},
    }


def test_gateway_filter_options() -> None:
    http10 = gateway_connect_filter(ConnectGateway({"app": "gw"}, 80, accept_http10=True))
    assert http10 is not None
    value = only_patch(http10)["patch"]["value"]["typed_config"]
    assert value["http_protocol_options"] == {"accept_http_10": True}
    assert value["upgrade_configs"] == [{"upgrade_type": "CONNECT"}]
    # CONNECT already on (Envoy refuses a second CONNECT upgrade), HTTP/1.0 wanted: only the HTTP/1.0 part.
    only_http10 = gateway_connect_filter(ConnectGateway({"app": "gw"}, 80, enable_connect=False, accept_http10=True))
    assert only_http10 is not None
    assert only_patch(only_http10)["patch"]["value"]["typed_config"] == {
        "@type": HCM_TYPE,
        "http_protocol_options": {"accept_http_10": True},
    }
    assert gateway_connect_filter(ConnectGateway({"app": "gw"}, 80, enable_connect=False)) is None


def test_instance_filter_adds_one_virtual_host_on_the_route_configuration() -> None:
    manifest = instance_route_filter(GATEWAY, ConnectInstance("gpu-alice", "dev"))
    assert manifest["metadata"]["name"] == "ssh-gpu-alice.dev.connect"
    assert manifest["metadata"]["labels"]["ssh-gateway/instance"] == "gpu-alice"
    patch = only_patch(manifest)
    assert patch["applyTo"] == "VIRTUAL_HOST"
    assert patch["match"] == {"context": "GATEWAY", "routeConfiguration": {"name": "http.8080"}}
    assert patch["patch"]["operation"] == "ADD"
    authority = "ssh-gpu-alice.dev.svc.cluster.local"
    assert patch["patch"]["value"] == {
        "name": f"ssh-gateway.{authority}",
        "domains": [authority, f"{authority}:22"],
        "routes": [
            {
                "name": "ssh-gpu-alice-connect",
                "match": {"connect_matcher": {}},
                "route": {
                    "cluster": f"outbound|22||{authority}",
                    "upgrade_configs": [{"upgrade_type": "CONNECT", "connect_config": {}}],
                },
            }
        ],
    }


def test_manifests_gateway_filter_first_then_one_per_instance() -> None:
    instances = [ConnectInstance("a", "dev"), ConnectInstance("a", "prod"), ConnectInstance("b", "dev")]
    manifests = connect_manifests(GATEWAY, instances)
    assert [m["metadata"]["name"] for m in manifests] == [
        "ssh-gateway-connect",
        "ssh-a.dev.connect",
        "ssh-a.prod.connect",
        "ssh-b.dev.connect",
    ]
    domains = [d for m in manifests[1:] for d in only_patch(m)["patch"]["value"]["domains"]]
    assert len(domains) == len(set(domains)) == 6
    labelled = connect_manifests(ConnectGateway({"app": "gw"}, 80, labels={"stack": "dev"}), instances[:1])
    assert all(m["metadata"]["labels"]["stack"] == "dev" for m in labelled)


def test_duplicate_authority_is_refused_naming_it() -> None:
    same = [ConnectInstance("a", "dev"), ConnectInstance("a", "dev")]
    with pytest.raises(ValueError, match=r"'ssh-a\.dev\.svc\.cluster\.local' is used by two instances"):
        connect_manifests(GATEWAY, same)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: ConnectInstance("Alice", "dev"), r"instance name 'Alice' is not a DNS label"),
        (lambda: ConnectInstance("a" * 60, "dev"), r"instance name 'a{60}' is not a DNS label: 1-59"),
        (lambda: ConnectInstance("-a", "dev"), r"instance name '-a'"),
        (lambda: ConnectInstance("a", "dev_ns"), r"namespace 'dev_ns' is not a DNS label"),
        (lambda: ConnectInstance("a", "dev", "cluster..local"), r"cluster domain 'cluster\.\.local'"),
        (lambda: ConnectInstance("a", "dev", ""), r"cluster domain ''"),
        (lambda: ConnectGateway({}, 8080), r"selector is empty"),
        (lambda: ConnectGateway({"istio": "bad value"}, 8080), r"selector value 'bad value'"),
        (lambda: ConnectGateway({"-x": "gw"}, 8080), r"selector key '-x'"),
        (lambda: ConnectGateway({"istio": "gw"}, 0), r"gateway listener port 0 is not a port: an integer 1-65535"),
        (lambda: ConnectGateway({"istio": "gw"}, 65536), r"gateway listener port 65536"),
        (lambda: ConnectGateway({"istio": "gw"}, True), r"gateway listener port True"),
        (lambda: ConnectGateway({"istio": "gw"}, 80, namespace="Istio"), r"gateway namespace 'Istio'"),
    ],
)
def test_bad_input_is_refused_naming_the_value(make: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make()


def test_prefixed_selector_keys_are_labels() -> None:
    gateway = ConnectGateway({"app.kubernetes.io/name": "istio-ingressgateway", "istio": ""}, 8080)
    assert gateway.selector["app.kubernetes.io/name"] == "istio-ingressgateway"
    with pytest.raises(ValueError, match=r"selector key 'Bad_Prefix/name'"):
        ConnectGateway({"Bad_Prefix/name": "x"}, 8080)


# --- a standalone Envoy's bootstrap (connect.gateway.kind: envoy) -------------------------------------------------

STATIC = ConnectInstance("gpu-s", "demo")
SERVICE = ConnectInstance("gpu-k", "demo")
ROUTES = [EnvoyRoute(STATIC, StaticTarget(host="127.0.0.1", port=2225)), EnvoyRoute(SERVICE, ServiceUpstream())]


def the_hcm(bootstrap: dict[str, Any]) -> dict[str, Any]:
    [listener] = bootstrap["static_resources"]["listeners"]
    [chain] = listener["filter_chains"]
    [hcm] = chain["filters"]
    assert hcm["name"] == HCM_FILTER
    return dict(hcm["typed_config"])


def test_the_virtual_host_is_one_definition_for_istio_and_envoy() -> None:
    filter_value = only_patch(instance_route_filter(GATEWAY, SERVICE))["patch"]["value"]
    hcm = the_hcm(envoy_bootstrap(StandaloneEnvoy(listener_port=20080), ROUTES))
    assert filter_value == connect_virtual_host(SERVICE)
    assert hcm["route_config"]["virtual_hosts"] == [connect_virtual_host(STATIC), connect_virtual_host(SERVICE)]
    assert connect_virtual_host(SERVICE)["domains"] == connect_domains(SERVICE.authority)


def test_the_bootstrap_is_one_connect_listener_without_admin() -> None:
    bootstrap = envoy_bootstrap(StandaloneEnvoy(listener_port=20080, listen_address="127.0.0.1"), ROUTES)
    assert set(bootstrap) == {"static_resources"}  # no admin interface to expose
    [listener] = bootstrap["static_resources"]["listeners"]
    assert listener["address"] == {"socket_address": {"address": "127.0.0.1", "port_value": 20080}}
    hcm = the_hcm(bootstrap)
    assert hcm["@type"] == HCM_TYPE
    assert hcm["upgrade_configs"] == [{"upgrade_type": "CONNECT"}]
    assert hcm["http2_protocol_options"] == {"allow_connect": True}
    assert hcm["stream_idle_timeout"] == "300s"
    assert "http_protocol_options" not in hcm  # HTTP/1.0 off: Envoy answers nc -X connect 426
    assert [f["typed_config"]["@type"] for f in hcm["http_filters"]] == [ROUTER_TYPE]


def test_accept_http10_is_turned_on_in_the_bootstrap() -> None:
    hcm = the_hcm(envoy_bootstrap(StandaloneEnvoy(listener_port=1, accept_http10=True, stream_idle_timeout=90), []))
    assert hcm["http_protocol_options"] == {"accept_http_10": True}
    assert hcm["stream_idle_timeout"] == "90s"


def test_clusters_per_target_kind() -> None:
    named = EnvoyRoute(ConnectInstance("gpu-n", "demo"), StaticTarget(host="vm-7.internal", port=22))
    clusters = {
        c["name"]: c
        for c in envoy_bootstrap(StandaloneEnvoy(listener_port=1), [*ROUTES, named])["static_resources"]["clusters"]
    }

    def where(cluster: dict[str, Any]) -> tuple[str, str, int]:
        [endpoints] = cluster["load_assignment"]["endpoints"]
        [lb] = endpoints["lb_endpoints"]
        address = lb["endpoint"]["address"]["socket_address"]
        return cluster["type"], address["address"], address["port_value"]

    assert sorted(clusters) == sorted(connect_cluster(r.instance.authority) for r in [*ROUTES, named])
    assert where(clusters[connect_cluster(STATIC.authority)]) == ("STATIC", "127.0.0.1", 2225)
    # The Service by its cluster DNS name, resolved by an Envoy in the cluster; a static host by name likewise.
    assert where(clusters[connect_cluster(SERVICE.authority)]) == ("STRICT_DNS", SERVICE.authority, 22)
    assert where(clusters[connect_cluster("ssh-gpu-n.demo.svc.cluster.local")]) == ("STRICT_DNS", "vm-7.internal", 22)


def test_a_repeated_authority_is_refused_in_the_bootstrap() -> None:
    with pytest.raises(ValueError, match=r"CONNECT authority 'ssh-gpu-s.demo.svc.cluster.local' is used by two"):
        envoy_bootstrap(StandaloneEnvoy(listener_port=1), [ROUTES[0], ROUTES[0]])


def test_the_yaml_is_the_bootstrap() -> None:
    text = envoy_bootstrap_yaml(StandaloneEnvoy(listener_port=20080), ROUTES)
    assert text.startswith("# ssh-gateway: ")
    assert yaml.safe_load(text) == envoy_bootstrap(StandaloneEnvoy(listener_port=20080), ROUTES)


def test_the_istio_gateway_opens_one_http_server_on_the_service_port() -> None:
    assert istio_gateway(GATEWAY) is None  # not asked for: the cluster's own Gateway opens the port
    server = GatewayServer(port=80, hosts=namespace_hosts("gpu", "corp.internal"))
    labels = {"stack": "dev"}
    gateway = ConnectGateway({"istio": "ingressgateway"}, 8080, namespace="edge", labels=labels, server=server)
    manifest = istio_gateway(gateway)
    assert manifest == {
        "apiVersion": "networking.istio.io/v1",
        "kind": "Gateway",
        "metadata": {
            "name": "ssh-gateway-connect",
            "namespace": "edge",
            "labels": {"app.kubernetes.io/managed-by": "ssh-gateway", "stack": "dev"},
        },
        "spec": {
            "selector": {"istio": "ingressgateway"},
            # The Service port (istiod names the route configuration http.80); one host covers every authority.
            "servers": [
                {
                    "port": {"number": 80, "name": "http-ssh-connect", "protocol": "HTTP"},
                    "hosts": ["*.gpu.svc.corp.internal"],
                }
            ],
        },
    }
    [wildcard] = server.hosts
    assert ConnectInstance("c1", "gpu", "corp.internal").authority.endswith(wildcard.removeprefix("*"))
    assert [m["kind"] for m in connect_manifests(gateway, [])] == ["EnvoyFilter"]  # the Gateway is no patch


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: GatewayServer(port=0, hosts=("*.gpu.svc.cluster.local",)), "Gateway server port 0"),
        (lambda: GatewayServer(port=80, hosts=()), "no hosts"),
        (lambda: namespace_hosts("Gpu"), "namespace 'Gpu'"),
    ],
)
def test_a_bad_gateway_server_is_refused(make: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make()
