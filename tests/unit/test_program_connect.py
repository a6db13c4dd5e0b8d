"""CONNECT routing under Pulumi mocks: what connect-mode instances and the stack's CONNECT entry register and
export, next to port-mode instances, and what 100 instances cost in each mode."""

from __future__ import annotations

from typing import Any

import pulumi
import pytest
import yaml

from components.nsg_check import checked_plan
from components.program import build, check_connect_port
from ssh_gateway.core.names import (
    ALLOCATION_TYPE,
    CONNECT_ENTRY_TYPE,
    CONNECT_INSTANCE_TYPE,
    ENVOY_FILTER_TYPE,
    HOST_KEY_TYPE,
    ISTIO_GATEWAY_TYPE,
    NSG_RULE_TYPE,
    PANGOLIN_TYPE,
    PORT_CHECK_TYPE,
    SERVICE_TYPE,
    stack_marked,
)
from ssh_gateway.core.org import Binding, OrgView
from ssh_gateway.core.outputs import GatewayKind, Routing, Via, parse_stack_outputs
from ssh_gateway.core.settings import translate

from .conftest import RecordingMocks
from .test_program import UNIT, _issued, run_program, settings

pytestmark = pytest.mark.unit

CONNECT: dict[str, Any] = {
    "gateway": {"namespace": "istio-system", "selector": {"istio": "ingressgateway"}, "listenerPort": 8080},
    "serverAliveInterval": 30,
    "public": {"via": "pangolin", "port": 40443},
}
FIREWALL: dict[str, Any] = {
    "resourceGroup": "rg-gw",
    "nsgName": "nsg-gw",
    "sourceCidrs": ["203.0.113.0/24"],
    "priorityBase": 1000,
    "rules": "perInstance",  # what these tests count: a rule per instance
}
MIXED: list[dict[str, Any]] = [
    {"name": "gpu-01", "user": "alice"},
    {"name": "gpu-c1", "routing": "connect", "user": "carol", "podPort": 2222},
    {"name": "gpu-c2", "routing": "connect", "selector": {"app": "c2", "tier": "gpu"}},
]


def connect_settings(**overrides: Any) -> Any:
    values: dict[str, Any] = {"connect": CONNECT, "instances": MIXED, "firewall": FIREWALL}
    values.update(overrides)
    return settings(**values)


def by_name(mocks: RecordingMocks, typ: str) -> dict[str, pulumi.runtime.MockResourceArgs]:
    return {r.name: r for r in mocks.of_type(typ)}


def test_connect_instances_get_a_service_and_a_route_and_nothing_public(mocks: RecordingMocks) -> None:
    out = run_program(connect_settings())
    assert out["allocations"] == {"gpu-01": 40001}  # connect-mode instances hold no port
    services = {r.inputs["metadata"]["name"]: r.inputs for r in mocks.of_type(SERVICE_TYPE)}
    assert set(services) == {"ssh-gpu-01", "ssh-gpu-c1", "ssh-gpu-c2"}
    c1 = services["ssh-gpu-c1"]
    assert c1["metadata"]["namespace"] == "gpu" and c1["spec"]["type"] == "ClusterIP"
    assert c1["spec"]["ports"] == [{"name": "tcp-ssh", "protocol": "TCP", "port": 22, "targetPort": 2222}]
    assert c1["spec"]["selector"] == {"app": "gpu-c1"}
    assert services["ssh-gpu-c2"]["spec"]["selector"] == {"app": "c2", "tier": "gpu"}

    routes = {r.name: r for r in mocks.of_type(ENVOY_FILTER_TYPE) if r.name.endswith("-route")}
    assert set(routes) == {"gpu-c1-route", "gpu-c2-route"}
    route = routes["gpu-c1-route"].inputs
    assert (route["apiVersion"], route["kind"]) == ("networking.istio.io/v1alpha3", "EnvoyFilter")
    assert route["metadata"]["name"] == "ssh-gpu-c1.gpu.connect"
    assert route["metadata"]["namespace"] == "istio-system"  # next to the gateway pods it selects
    [patch] = route["spec"]["configPatches"]
    assert (patch["applyTo"], patch["patch"]["operation"]) == ("VIRTUAL_HOST", "ADD")
    assert patch["match"]["routeConfiguration"] == {"name": "http.8080"}
    virtual_host = patch["patch"]["value"]
    assert virtual_host["domains"] == ["ssh-gpu-c1.gpu.svc.cluster.local", "ssh-gpu-c1.gpu.svc.cluster.local:22"]
    # Envoy's own field names reach the API server as written (no camelCase translation of a CR's spec).
    assert virtual_host["routes"][0]["route"]["upgrade_configs"] == [{"upgrade_type": "CONNECT", "connect_config": {}}]
    assert route["spec"]["workloadSelector"] == {"labels": {"istio": "ingressgateway"}}

    # Per instance, only the port-mode one has a Pangolin resource and an NSG rule; plus the entry's one each.
    pangolin = {r.inputs["name"] for r in mocks.of_type(PANGOLIN_TYPE)}
    assert pangolin == {"ssh-gateway/unit/gpu-01", "ssh-gateway/unit/@connect"}
    rules = {r.inputs["securityRuleName"] for r in mocks.of_type(NSG_RULE_TYPE)}
    assert rules == {"ssh-gateway-gpu-01", "ssh-gateway.unit.connect"}
    children = sorted(r.name for r in mocks.registered if r.name.startswith("gpu-c1"))
    assert children == ["gpu-c1", "gpu-c1-host-key-secret", "gpu-c1-route", "gpu-c1-service"]
    assert [r.name for r in mocks.of_type(CONNECT_INSTANCE_TYPE)] == ["gpu-c1", "gpu-c2"]


def test_the_stack_entry_is_one_filter_one_pangolin_resource_one_rule(mocks: RecordingMocks) -> None:
    run_program(connect_settings())
    [entry] = mocks.of_type(CONNECT_ENTRY_TYPE)
    assert entry.name == "connect"
    [gateway_filter] = [r for r in mocks.of_type(ENVOY_FILTER_TYPE) if r.name == "connect-gateway-filter"]
    assert gateway_filter.inputs["metadata"]["name"] == "ssh-gateway-connect"
    [patch] = gateway_filter.inputs["spec"]["configPatches"]
    assert (patch["applyTo"], patch["patch"]["operation"]) == ("NETWORK_FILTER", "MERGE")
    typed = patch["patch"]["value"]["typed_config"]
    assert typed["upgrade_configs"] == [{"upgrade_type": "CONNECT"}] and "http_protocol_options" not in typed

    pangolin = by_name(mocks, PANGOLIN_TYPE)["connect-pangolin"].inputs
    assert (pangolin["proxyPort"], pangolin["targetIp"], pangolin["targetPort"], pangolin["siteId"]) == (
        40443,
        "istio-ingressgateway.istio-system.svc.cluster.local",
        80,
        3,
    )
    rule = by_name(mocks, NSG_RULE_TYPE)["connect-nsg-rule"].inputs
    assert rule["destinationPortRange"] == "40443"
    assert rule["sourceAddressPrefix"] == "203.0.113.0/24"
    assert rule["securityRuleName"] == "ssh-gateway.unit.connect"  # the stack's own: shards may share an NSG
    assert rule["description"].endswith("[stack ssh-gateway/unit]")
    # The first free from priorityBase past the per-port block 1000-1099: never an instance's priority.
    assert rule["priority"] == 1100
    instance_priorities = {r.inputs["priority"] for r in mocks.of_type(NSG_RULE_TYPE)} - {1100}
    assert instance_priorities == {1001}


def test_a_connect_rule_under_the_old_shared_name_moves_to_the_stacks_own_at_another_priority(
    mocks: RecordingMocks,
) -> None:
    # The old `ssh-gateway.connect` rule stays until the new one exists (Pulumi replaces create-before-delete),
    # so the new one must not take its priority: Azure refuses two inbound rules at one.
    old = stack_marked("ssh-gateway: public ssh over HTTP CONNECT", "ssh-gateway", "unit")
    mocks.nsg_rules = [
        {"name": "ssh-gateway.connect", "priority": 1100, "direction": "Inbound", "description": old},
        {"name": "ssh-gateway-gpu-01", "priority": 1001, "direction": "Inbound", "description": old},
    ]
    stack_settings = connect_settings()
    plan = checked_plan(stack_settings, org=OrgView(), name=UNIT)

    @pulumi.runtime.test  # type: ignore[untyped-decorator]
    def program() -> None:
        build(plan)

    program()
    rule = by_name(mocks, NSG_RULE_TYPE)["connect-nsg-rule"].inputs
    assert (rule["securityRuleName"], rule["priority"]) == ("ssh-gateway.unit.connect", 1101)


def test_outputs_say_the_routing_and_give_the_connect_ssh_config(mocks: RecordingMocks) -> None:
    key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAi5LozFLqWuY6k4TyD1C+Oys0CW2N2WqpjyAxjMsw+d"
    instances = [*MIXED[:2], {**MIXED[2], "hostKey": key}]
    out = run_program(connect_settings(instances=instances))
    assert out["endpoints"]["gpu-01"]["routing"] == "port"
    assert out["endpoints"]["gpu-c1"] == {
        "routing": "connect",
        "host": "ssh-connect.example.com",
        "port": 40443,
        "authority": "ssh-gpu-c1.gpu.svc.cluster.local",
        "route": "istio-system/ssh-gpu-c1.gpu.connect",
        "user": "carol",
        "ssh": 'ssh -o "ProxyCommand=proxytunnel -q -p ssh-connect.example.com:40443 -d %h:%p" '
        "-o HostKeyAlias=ssh-gpu-c1 carol@ssh-gpu-c1.gpu.svc.cluster.local",
        "pangolinResourceId": 7,
    }
    assert list(out["endpoints"]) == ["gpu-01", "gpu-c1", "gpu-c2"]  # the settings' order
    assert (
        "Host ssh-gpu-c1\n"
        "    HostName ssh-gpu-c1.gpu.svc.cluster.local\n"
        "    Port 22\n"
        "    User carol\n"
        "    HostKeyAlias ssh-gpu-c1\n"
        "    ProxyCommand proxytunnel -q -p ssh-connect.example.com:40443 -d %h:%p\n"
        "    ServerAliveInterval 30\n"
    ) in out["sshConfig"]
    assert out["sshConfig"].count("Host ") == 3 and "*" not in out["sshConfig"].replace("%h:%p", "")
    # ssh looks a host key up under the HostKeyAlias, so that is the known_hosts name of a connect instance: the
    # CA line covers the aliases (as well as the port-mode names), and gpu-c2's pin is under its alias.
    ca_line, pinned = out["knownHosts"].splitlines()
    assert ca_line.startswith("@cert-authority ssh-*.example.com,[ssh-*.example.com]:*,ssh-*,[ssh-*]:* ssh-ed25519 ")
    assert pinned == f"ssh-gpu-c2,[ssh-gpu-c2]:* {key}"
    assert (
        "    ServerAliveInterval 30\n"
        "    UserKnownHostsFile ~/.ssh/known_hosts.d/ssh-gateway-unit\n"
        "    StrictHostKeyChecking yes\n"
    ) in out["sshConfig"]
    assert out["sshConfig"].count("HostKeyAlias ssh-gpu-c1") == 1

    # One published port and one entry point for every connect-mode instance, beside the port-mode range.
    gateway = out["gateway"]
    assert gateway["gerbilConnectPort"] == "40443:40443/tcp"
    assert gateway["traefikEntryPoints"]["tcp-40443"] == {"address": ":40443/tcp"}
    assert len(gateway["traefikEntryPoints"]) == 101
    assert out["connect"] == {
        "via": "pangolin",
        "host": "ssh-connect.example.com",
        "port": 40443,
        "pangolinResourceId": 7,
        "acceptHttp10": False,
        "serverAliveInterval": 30,
        "gateway": {
            "kind": "istio",
            "namespace": "istio-system",
            "selector": {"istio": "ingressgateway"},
            "listenerPort": 8080,
            "service": "istio-ingressgateway",
            "servicePort": 80,
            "createGateway": False,
        },
    }
    # The contract the tools read them through (ssh_gateway/core/outputs.py) reads them back typed.
    read = parse_stack_outputs(out)
    assert [ep.routing for ep in read.endpoints.values()] == [Routing.PORT, Routing.CONNECT, Routing.CONNECT]
    assert read.endpoints["gpu-c1"].authority == "ssh-gpu-c1.gpu.svc.cluster.local"
    assert read.endpoints["gpu-c1"].pangolin_resource_id == 7
    assert read.connect is not None
    assert (read.connect.via, read.connect.gateway_kind, read.connect.port) == (Via.PANGOLIN, GatewayKind.ISTIO, 40443)


def test_connect_instances_get_their_host_identity_for_authority_and_alias(mocks: RecordingMocks) -> None:
    raw = connect_settings()
    out = run_program(raw)
    assert not mocks.of_type(HOST_KEY_TYPE)  # derived from the stack's root: no resource per instance
    issued = _issued(out, mocks, raw)
    assert issued["gpu-c1"].principals == ("ssh-gpu-c1", "ssh-gpu-c1.gpu.svc.cluster.local")
    assert issued["gpu-01"].principals == ("ssh-gpu-01", "ssh-gpu-01.example.com")
    secrets = {r.inputs["metadata"]["name"]: r.inputs for r in mocks.of_type("kubernetes:core/v1:Secret")}
    assert secrets["ssh-gpu-c1-host-key"]["metadata"]["namespace"] == "gpu"  # next to its Service


def test_direct_entry_creates_nothing_public(mocks: RecordingMocks) -> None:
    direct = {**CONNECT, "public": {"via": "direct", "host": "gw.example.com", "port": 443}}
    out = run_program(connect_settings(connect=direct, instances=MIXED[1:]))
    assert not mocks.of_type(PANGOLIN_TYPE) and not mocks.of_type(NSG_RULE_TYPE)
    assert "ProxyCommand proxytunnel -q -p gw.example.com:443 -d %h:%p" in out["sshConfig"]
    assert out["endpoints"]["gpu-c1"]["pangolinResourceId"] is None
    # No port-mode instance: the range is not published, and a direct entry is the LoadBalancer's, not Gerbil's.
    assert out["gateway"] == {"traefikEntryPoints": {}}
    assert out["allocations"] == {}
    assert len(mocks.of_type(ALLOCATION_TYPE)) == 1


def test_options_shape_the_gateway_filter(mocks: RecordingMocks) -> None:
    run_program(connect_settings(connect={**CONNECT, "enableConnect": False}))
    # No gateway filter (nothing to turn on). Sorted: the instances register theirs concurrently.
    assert sorted(r.name for r in mocks.of_type(ENVOY_FILTER_TYPE)) == ["gpu-c1-route", "gpu-c2-route"]


def test_the_port_check_covers_the_connect_port_when_pangolin_binds_it(mocks: RecordingMocks) -> None:
    run_program(connect_settings())
    [check] = mocks.of_type(PORT_CHECK_TYPE)
    assert check.inputs["ports"] == {"gpu-01": 40001, "@connect": 40443}
    direct = {**CONNECT, "public": {"via": "direct", "host": "gw.example.com", "port": 443}}
    run_program(connect_settings(connect=direct))
    assert mocks.of_type(PORT_CHECK_TYPE)[-1].inputs["ports"] == {"gpu-01": 40001}  # no Pangolin resource to check


def test_a_stack_without_a_port_range_allocates_nothing(mocks: RecordingMocks) -> None:
    connected = [i for i in MIXED if i.get("routing") == "connect"]
    out = run_program(connect_settings(instances=connected, ports={}))
    assert mocks.of_type(ALLOCATION_TYPE) == []  # no PortAllocation at all
    assert (out["allocations"], out["releasedPorts"], out["portRange"]) == ({}, [], None)
    assert "gerbilPublishedPorts" not in out["gateway"]
    assert set(out["gateway"]["traefikEntryPoints"]) == {"tcp-40443"}
    [check] = mocks.of_type(PORT_CHECK_TYPE)
    assert check.inputs["ports"] == {"@connect": 40443}
    # No range, no per-port block: the CONNECT rule takes priorityBase itself.
    [rule] = mocks.of_type(NSG_RULE_TYPE)
    assert rule.inputs["priority"] == 1000


def test_create_gateway_adds_an_istio_gateway_to_the_entry(mocks: RecordingMocks) -> None:
    run_program(connect_settings())
    assert mocks.of_type(ISTIO_GATEWAY_TYPE) == []  # off by default: the cluster's own Gateway opens port 80
    gateway = {**CONNECT["gateway"], "servicePort": 8081, "createGateway": True}
    run_program(connect_settings(connect={**CONNECT, "gateway": gateway}))
    [created] = mocks.of_type(ISTIO_GATEWAY_TYPE)
    assert created.name == "connect-gateway"
    assert created.inputs["metadata"]["namespace"] == "istio-system"
    assert created.inputs["spec"] == {
        "selector": {"istio": "ingressgateway"},
        "servers": [
            {
                "port": {"number": 8081, "name": "http-ssh-connect", "protocol": "HTTP"},
                "hosts": ["*.gpu.svc.cluster.local"],
            }
        ],
    }


def test_http10_is_turned_on_in_the_gateway_filter(mocks: RecordingMocks) -> None:
    run_program(connect_settings(connect={**CONNECT, "acceptHttp10": True}))
    [gateway_filter] = [r for r in mocks.of_type(ENVOY_FILTER_TYPE) if r.name == "connect-gateway-filter"]
    typed = gateway_filter.inputs["spec"]["configPatches"][0]["patch"]["value"]["typed_config"]
    assert typed["http_protocol_options"] == {"accept_http_10": True}


def test_a_connect_port_bound_by_someone_else_is_refused() -> None:
    stack_settings = connect_settings()
    ours = OrgView((Binding(port=40443, resource_id=5, name="ssh-gateway/unit/@connect", protocol="tcp"),))
    check_connect_port(stack_settings, ours, UNIT)  # a leftover of ours: adopted
    theirs = OrgView((Binding(port=40443, resource_id=9, name="team-b/postgres", protocol="tcp"),))
    with pytest.raises(pulumi.RunError, match=r"connect.public.port 40443 is already bound by Pangolin resource 9"):
        check_connect_port(stack_settings, theirs, UNIT)


def hundred(routing: str) -> list[dict[str, Any]]:
    return [{"name": f"gpu-{n:03}", "routing": routing} for n in range(100)]


@pytest.mark.parametrize(("routing", "expected"), [("port", (100, 100, 100)), ("connect", (1, 1, 1))])
def test_what_100_instances_cost_in_each_mode(
    mocks: RecordingMocks, routing: str, expected: tuple[int, int, int]
) -> None:
    """Public ports (Pangolin resources, each on its own port), NSG rules and Traefik entry points, read from
    what the program registers and exports: a port stack, and a connect stack."""
    connect = CONNECT if routing == "connect" else None
    out = run_program(connect_settings(ports={"range": "40000-40099"}, instances=hundred(routing), connect=connect))
    public_ports = {r.inputs["proxyPort"] for r in mocks.of_type(PANGOLIN_TYPE)}
    rules = mocks.of_type(NSG_RULE_TYPE)
    entry_points = out["gateway"]["traefikEntryPoints"]
    counts = (len(public_ports), len(rules), len(entry_points))
    assert counts == expected, counts
    assert len(mocks.of_type(PANGOLIN_TYPE)) == len(public_ports)


@pytest.mark.usefixtures("mocks")
def test_the_connect_entry_is_translated_once_per_run_not_per_instance(monkeypatch: pytest.MonkeyPatch) -> None:
    """100 connect-mode instances share one gateway and one entry: `build` translates each from the settings once
    and hands the same objects to the entry and every instance."""
    calls = {"connect_gateway": 0, "connect_entry": 0}
    for name in calls:
        real = getattr(translate, name)

        def counted(*args: Any, _real: Any = real, _name: str = name) -> Any:
            calls[_name] += 1
            return _real(*args)

        monkeypatch.setattr(translate, name, counted)
    run_program(connect_settings(ports={"range": "40000-40099"}, instances=hundred("connect")))
    assert calls == {"connect_gateway": 1, "connect_entry": 1}


# --- connect.gateway.kind: envoy -----------------------------------------------------------------------------------

ENVOY: dict[str, Any] = {
    "gateway": {"kind": "envoy", "listenerPort": 20080, "targetHost": "10.0.0.9"},
    "serverAliveInterval": 30,
    "public": {"via": "pangolin", "port": 40443},
}
STATIC_CONNECT: list[dict[str, Any]] = [
    {"name": "gpu-s1", "routing": "connect", "target": "static", "staticHost": "10.1.0.5", "staticPort": 22},
    {"name": "gpu-s2", "routing": "connect", "target": "static", "staticHost": "10.1.0.6", "staticPort": 2222},
    {"name": "vm-01", "target": "static", "staticHost": "10.1.2.3", "staticPort": 2200},
]


def test_envoy_with_static_instances_registers_nothing_of_kubernetes(mocks: RecordingMocks) -> None:
    raw = connect_settings(connect=ENVOY, instances=STATIC_CONNECT)
    out = run_program(raw)
    kubernetes = [r.typ for r in mocks.registered if "kubernetes" in r.typ]
    assert kubernetes == []  # no provider, no Service, no EnvoyFilter: the stack needs no plugin and no cluster
    # The CONNECT entry is still one Pangolin resource to the Envoy listener, and its NSG rule.
    [entry] = [r for r in mocks.of_type(PANGOLIN_TYPE) if r.name == "connect-pangolin"]
    assert (entry.inputs["proxyPort"], entry.inputs["targetIp"], entry.inputs["targetPort"]) == (
        40443,
        "10.0.0.9",
        20080,
    )
    assert sorted(r.inputs["destinationPortRange"] for r in mocks.of_type(NSG_RULE_TYPE)) == ["40001", "40443"]
    assert len(mocks.of_type(CONNECT_INSTANCE_TYPE)) == 2 and len(mocks.of_type(CONNECT_ENTRY_TYPE)) == 1

    config = yaml.safe_load(out["envoyConfig"])
    [listener] = config["static_resources"]["listeners"]
    assert listener["address"]["socket_address"]["port_value"] == 20080
    hcm = listener["filter_chains"][0]["filters"][0]["typed_config"]
    assert [vh["domains"][0] for vh in hcm["route_config"]["virtual_hosts"]] == [
        "ssh-gpu-s1.gpu.svc.cluster.local",
        "ssh-gpu-s2.gpu.svc.cluster.local",
    ]
    clusters = {c["name"]: c for c in config["static_resources"]["clusters"]}
    s2 = clusters["outbound|22||ssh-gpu-s2.gpu.svc.cluster.local"]
    assert s2["type"] == "STATIC"
    assert s2["load_assignment"]["endpoints"][0]["lb_endpoints"][0]["endpoint"]["address"] == {
        "socket_address": {"address": "10.1.0.6", "port_value": 2222}
    }
    # No Secret and no output for the issued identities of static targets: `ssh-gateway host-identity` derives them.
    assert "hostIdentities" not in out
    assert _issued(out, mocks, raw)["gpu-s1"].principals == ("ssh-gpu-s1", "ssh-gpu-s1.gpu.svc.cluster.local")
    assert out["endpoints"]["gpu-s1"]["route"] == "envoyConfig/ssh-gateway.ssh-gpu-s1.gpu.svc.cluster.local"
    assert out["connect"]["gateway"] == {
        "kind": "envoy",
        "listenerPort": 20080,
        "targetHost": "10.0.0.9",
        "servicePort": 20080,
    }


def test_envoy_with_service_instances_keeps_their_services_and_no_envoyfilter(mocks: RecordingMocks) -> None:
    out = run_program(connect_settings(connect={**ENVOY, "acceptHttp10": True}))
    assert mocks.of_type(ENVOY_FILTER_TYPE) == []
    services = {r.inputs["metadata"]["name"]: r.inputs for r in mocks.of_type(SERVICE_TYPE)}
    assert services["ssh-gpu-c1"]["spec"]["type"] == "ClusterIP"
    config = yaml.safe_load(out["envoyConfig"])
    clusters = {c["name"]: c["type"] for c in config["static_resources"]["clusters"]}
    assert clusters == {
        "outbound|22||ssh-gpu-c1.gpu.svc.cluster.local": "STRICT_DNS",
        "outbound|22||ssh-gpu-c2.gpu.svc.cluster.local": "STRICT_DNS",
    }
    hcm = config["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
    assert hcm["http_protocol_options"] == {"accept_http_10": True}


def test_no_connect_instance_no_envoy_config(mocks: RecordingMocks) -> None:
    assert "envoyConfig" not in run_program(connect_settings(connect=ENVOY, instances=STATIC_CONNECT[2:]))
    assert "envoyConfig" not in run_program(connect_settings())  # an Istio gateway: EnvoyFilters instead
