"""Bad config fails before anything is registered, naming the key, the value and what is allowed."""

from __future__ import annotations

from typing import Any

import pytest

from ssh_gateway.core.connect import ConnectGateway, DirectEntry, PangolinEntry, ServiceUpstream, StandaloneEnvoy
from ssh_gateway.core.firewall import ServiceTag
from ssh_gateway.core.ports import PortRange
from ssh_gateway.core.settings import (
    ConnectModeInstance,
    FirewallOff,
    FirewallOn,
    HostIdentityOff,
    HostIdentityOn,
    SettingsError,
    StaticInstance,
    decode_config,
    parse_settings,
)
from ssh_gateway.core.targets import StaticTarget

pytestmark = pytest.mark.unit


def raw(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "pangolin": {"url": "http://127.0.0.1:3003/v1", "orgId": "acme", "siteId": 1},
        "ports": {"range": "40000-40019"},
        "gateway": {"hostTemplate": "ssh-{instance}.example.com"},
        "firewall": {"enabled": False},
        "instances": [{"name": "gpu-01", "target": "static", "staticHost": "127.0.0.1", "staticPort": 2222}],
    }
    base.update(overrides)
    return base


def error(**overrides: Any) -> str:
    with pytest.raises(SettingsError) as info:
        parse_settings(raw(**overrides))
    return str(info.value)


def test_valid_config_parses() -> None:
    settings = parse_settings(raw())
    assert settings.ports.range == PortRange(start=40000, end=40019)
    assert isinstance(settings.instances[0], StaticInstance) and settings.instances[0].user == "root"
    assert isinstance(settings.firewall, FirewallOff)


def test_target_and_firewall_are_unions_tagged_by_their_field() -> None:
    settings = parse_settings(
        raw(
            kubernetes={"nodeIp": "10.0.0.4"},
            firewall={"resourceGroup": "rg", "nsgName": "nsg", "sourceCidrs": ["Internet"]},
            instances=[{"name": "a"}, {"name": "b", "target": "clusterIp"}],
        )
    )
    assert [type(i).__name__ for i in settings.instances] == ["NodePortInstance", "ClusterIpInstance"]
    assert isinstance(settings.firewall, FirewallOn) and settings.firewall.source_cidrs == ServiceTag("Internet")


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"instances": [{"name": "GPU_01", "target": "clusterIp"}]}, 'ssh-gateway:instances[0].name = "GPU_01"'),
        ({"instances": [{"name": "gpu-01", "target": "clusterIp"}] * 2}, "duplicate name(s) gpu-01"),
        ({"instances": [{"name": "a", "target": "clusterIp", "port": 70000}]}, "ssh-gateway:instances[0].port = 70000"),
        ({"ports": {"range": "40099-40000"}}, 'ssh-gateway:ports.range = "40099-40000"'),
        ({"ports": {"range": "forty"}}, 'is not a range "start-end"'),
        ({"ports": {"range": "40000-40019", "reserved": [0]}}, "ssh-gateway:ports.reserved[0] = 0"),
        (
            {"firewall": {"resourceGroup": "rg", "nsgName": "n", "sourceCidrs": ["10.0.0.0/33"]}},
            'ssh-gateway:firewall.sourceCidrs = ["10.0.0.0/33"]',
        ),
        (
            {"firewall": {"enabled": True, "sourceCidrs": ["10.0.0.0/8"]}},
            "ssh-gateway:firewall.resourceGroup: required",
        ),
        ({"colour": "blue"}, "ssh-gateway:colour: unknown key"),
        ({"kubernetes": {"skipAwait": True}}, "ssh-gateway:kubernetes.skipAwait: removed: every ssh Service skips"),
        (
            {"ports": {"range": "40000-40019", "reserve": [1]}},
            "ssh-gateway:ports.reserve: unknown key; did you mean 'reserved'?",
        ),
        ({"pangolin": {"url": "ftp://x", "orgId": "acme", "siteId": 1}}, 'ssh-gateway:pangolin.url = "ftp://x"'),
        ({"gateway": {"hostTemplate": "ssh {instance}"}}, "ssh-gateway:gateway.hostTemplate"),
        (
            {"gateway": {"hostTemplate": "h", "publishedRange": "40000-40009"}},
            "ports.range 40000-40019 is not inside gateway.publishedRange 40000-40009",
        ),
        (
            {"instances": [{"name": "a", "target": "nodePort"}]},
            "ssh-gateway:instances[0].target: instance 'a' has target nodePort, so set kubernetes.nodeIp",
        ),
        (
            {"instances": [{"name": "a", "target": "static"}]},
            "ssh-gateway:instances[0].staticHost: required, but not set",
        ),
        # Found by trying bad stack configs as a user would (issue 10):
        ({"kubernetes": {"nodeIp": "10.0.0.256"}}, 'ssh-gateway:kubernetes.nodeIp = "10.0.0.256"'),
        (
            {"firewall": {"resourceGroup": "rg", "nsgName": "n", "sourceCidrs": ["Internet", "10.0.0.0/8"]}},
            "mixes the service tag 'Internet' with other sources",
        ),
        (
            {"pangolin": {"url": "https://user@/v1", "orgId": "acme", "siteId": 1}},
            'ssh-gateway:pangolin.url = "https://user@/v1"',
        ),
        ({"pangolin": {"url": "https://u:p@h.example/v1", "orgId": "acme", "siteId": 1}}, "carries credentials"),
        (
            {"pangolin": {"url": "http://h/v1", "orgId": "Acme", "siteId": 1}},
            "ssh-gateway:pangolin.orgId = \"Acme\": 'Acme' is not a Pangolin org id",
        ),
        (
            {"instances": [{"name": "a", "target": "nodeport"}]},
            'ssh-gateway:instances[0].target = "nodeport": unknown target; allowed: nodePort, clusterIp, static; '
            "did you mean 'nodePort'?",
        ),
        (
            {"instances": [{"name": "a", "target": "static", "staticHost": "h", "staticPort": 22, "podPort": 2}]},
            "ssh-gateway:instances[0].podPort: not a key of target static; it belongs to target nodePort and clusterIp",
        ),
        (
            {
                "firewall": {
                    "resourceGroup": "rg",
                    "nsgName": "n",
                    "sourceCidrs": ["10.0.0.0/8"],
                    "priorityBase": 4090,
                    "rules": "perInstance",  # a block of the range's size
                }
            },
            "ssh-gateway:firewall.priorityBase: priorities 4090-4109",
        ),
        (
            {"instances": [{"name": "a", "target": "static", "staticHost": "h", "staticPort": 22, "hostKey": "AAAA"}]},
            "ssh-gateway:instances[0].hostKey",
        ),
        ({"prots": {}}, "ssh-gateway:prots: unknown key; did you mean 'ports'?"),
        # Host identity:
        ({"hostIdentity": {"validDays": 0}}, "ssh-gateway:hostIdentity.validDays = 0"),
        ({"hostIdentity": {"validDays": 4000}}, "ssh-gateway:hostIdentity.validDays = 4000"),
        (
            {"hostIdentity": {"validDay": 30}},
            "ssh-gateway:hostIdentity.validDay: unknown key; did you mean 'validDays'?",
        ),
        (
            {"hostIdentity": {"ca": {"generation": [1]}}},
            "ssh-gateway:hostIdentity.ca.generation: unknown key; did you mean 'generations'?",
        ),
        ({"hostIdentity": {"ca": {"generations": []}}}, "ssh-gateway:hostIdentity.ca.generations: is empty"),
        ({"hostIdentity": {"ca": {"generations": [0]}}}, "ssh-gateway:hostIdentity.ca.generations[0] = 0"),
        (
            {"hostIdentity": {"ca": {"generations": [1, 2, 1]}}},
            "ssh-gateway:hostIdentity.ca.generations: lists 1 twice",
        ),
        (
            {"hostIdentity": {"ca": {"generations": [1, 2], "signing": 3}}},
            "ssh-gateway:hostIdentity.ca.signing: 3 is not one of hostIdentity.ca.generations [1, 2]",
        ),
        ({"hostIdentity": {"enabled": "maybe"}}, "ssh-gateway:hostIdentity"),
        (
            {"hostIdentity": {"enabled": False, "validDays": 30}},
            "ssh-gateway:hostIdentity.validDays: not allowed with enabled: false",
        ),
        (
            {
                "instances": [
                    {"name": "a", "target": "static", "staticHost": "h", "staticPort": 22, "hostKeyGeneration": 0}
                ]
            },
            "ssh-gateway:instances[0].hostKeyGeneration = 0",
        ),
        (
            {
                "instances": [
                    {
                        "name": "a",
                        "target": "static",
                        "staticHost": "h",
                        "staticPort": 22,
                        "hostKeyGeneration": 2,
                        "hostKey": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAi5LozFLqWuY6k4TyD1C+Oys0CW2N2WqpjyAxjMsw+d",
                    }
                ]
            },
            "ssh-gateway:instances[0].hostKeyGeneration: instance 'a' pins hostKey, so it is issued no host key",
        ),
    ],
)
def test_bad_input_is_named(overrides: dict[str, Any], expected: str) -> None:
    assert expected in error(**overrides)


def test_host_identity_defaults_and_the_signer() -> None:
    settings = parse_settings(raw())
    identity = settings.host_identity
    assert isinstance(identity, HostIdentityOn)
    assert (identity.valid_days, identity.ca.generations, identity.ca.signer) == (365, (1,), 1)
    assert settings.instances[0].host_key_generation == 1
    assert settings.issues_host_key(settings.instances[0]) and not settings.delivers_secret(settings.instances[0])
    rotating = parse_settings(raw(hostIdentity={"ca": {"generations": [1, 2]}})).host_identity
    assert isinstance(rotating, HostIdentityOn) and rotating.ca.signer == 2  # the last one, unless told
    overlap = parse_settings(raw(hostIdentity={"ca": {"generations": [1, 2], "signing": 1}})).host_identity
    assert isinstance(overlap, HostIdentityOn) and overlap.ca.signer == 1
    off = parse_settings(raw(hostIdentity={"enabled": False}))
    assert isinstance(off.host_identity, HostIdentityOff) and not off.issues_host_key(off.instances[0])


def test_rendering_warns_that_host_key_secrets_are_not_written() -> None:
    service = {"name": "gpu-k8s", "target": "clusterIp"}
    pinned = {**service, "name": "gpu-pinned", "hostKey": "ssh-ed25519 " + "A" * 68}
    rendered = parse_settings(
        raw(ports={"range": "20000-20019"}, kubernetes={"renderDir": "/tmp/out"}, instances=[service, pinned])
    )
    [warning] = list(rendered.warnings())
    assert warning.startswith("ssh-gateway:kubernetes.renderDir is set, so the host-key Secrets of gpu-k8s are not")
    assert not rendered.delivers_secret(rendered.instances[0])
    applied = parse_settings(raw(ports={"range": "20000-20019"}, instances=[service]))
    assert not list(applied.warnings()) and applied.delivers_secret(applied.instances[0])


def test_a_misspelt_pangolin_key_is_refused() -> None:
    with pytest.raises(SettingsError, match="pangolin:apikey: unknown key; did you mean 'pangolin:apiKey'"):
        decode_config({"pangolin:apikey": "k.s"})


def test_a_range_in_the_ephemeral_ports_is_warned_about() -> None:
    assert [w.split(" overlaps")[0] for w in parse_settings(raw()).warnings()] == [
        "ssh-gateway:ports.range 40000-40019"
    ]
    assert not list(parse_settings(raw(ports={"range": "20000-20019"})).warnings())


def test_every_problem_is_reported_at_once() -> None:
    message = error(ports={"range": "1-0"}, instances=[{"name": "Bad", "target": "clusterIp"}])
    assert "ssh-gateway:ports.range" in message and "ssh-gateway:instances[0].name" in message


def test_decode_config_takes_only_this_namespace() -> None:
    decoded = decode_config(
        {
            "ssh-gateway:ports": '{"range": "1-2"}',
            "ssh-gateway:production": "true",
            "pangolin:apiKey": "k.s",
            "aws:region": "x",
        }
    )
    assert decoded == {"ports": {"range": "1-2"}, "production": True}


# --- CONNECT routing ----------------------------------------------------------------------------------------


CONNECT: dict[str, Any] = {"public": {"via": "pangolin", "port": 20443}}


def connect_raw(**overrides: Any) -> dict[str, Any]:
    base = raw(connect=CONNECT, instances=[{"name": "gpu-c", "routing": "connect"}])
    base.update(overrides)
    return base


def connect_error(**overrides: Any) -> str:
    with pytest.raises(SettingsError) as info:
        parse_settings(connect_raw(**overrides))
    return str(info.value)


def test_a_stack_of_connect_instances_needs_no_port_range() -> None:
    settings = parse_settings({k: v for k, v in connect_raw().items() if k != "ports"})
    assert settings.ports.range is None and settings.published_range is None
    assert not list(settings.warnings())  # nothing about a range that is not there


def test_a_port_mode_instance_needs_the_port_range() -> None:
    instances = [{"name": "gpu-c", "routing": "connect"}, {"name": "gpu-p", "target": "clusterIp"}]
    message = connect_error(ports={"reserved": [40000]}, instances=instances)
    assert message == (
        "invalid stack config:\n  ssh-gateway:ports.range: required: instance 'gpu-p' (instances[1]) has routing port, "
        'so it needs a public port from this range, e.g. "40000-40099"; leave it out only when every instance has '
        "routing: connect"
    )


def test_routing_is_per_instance_with_a_stack_default() -> None:
    settings = parse_settings(
        connect_raw(
            routing="connect",
            instances=[
                {"name": "gpu-c"},
                {"name": "gpu-p", "routing": "port", "target": "static", "staticHost": "127.0.0.1", "staticPort": 22},
            ],
        )
    )
    assert [(type(i).__name__, i.routing) for i in settings.instances] == [
        ("ConnectServiceInstance", "connect"),
        ("StaticInstance", "port"),
    ]
    assert [i.routing for i in parse_settings(raw()).instances] == ["port"]  # the default default


def test_connect_defaults_are_istios_ingress_gateway() -> None:
    settings = parse_settings(connect_raw())
    gateway = settings.connect_gateway()
    assert isinstance(gateway, ConnectGateway)
    assert (dict(gateway.selector), gateway.listener_port, gateway.namespace) == (
        {"istio": "ingressgateway"},
        8080,
        "istio-system",
    )
    assert (gateway.enable_connect, gateway.accept_http10) == (True, False)
    assert settings.connect_entry() == PangolinEntry(
        host="ssh-connect.example.com",
        port=20443,
        target_host="istio-ingressgateway.istio-system.svc.cluster.local",
        target_port=80,
    )
    [inst] = settings.instances
    assert isinstance(inst, ConnectModeInstance)
    assert settings.connect_instance(inst).authority == "ssh-gpu-c.default.svc.cluster.local"
    assert settings.connect is not None and settings.connect.server_alive_interval == 60


def test_connect_entry_is_a_union_tagged_by_via() -> None:
    direct = parse_settings(connect_raw(connect={"public": {"via": "direct", "host": "gw.example.com", "port": 443}}))
    assert direct.connect_entry() == DirectEntry(host="gw.example.com", port=443)
    local = parse_settings(
        connect_raw(
            kubernetes={"clusterDomain": "corp.local"},
            connect={
                "gateway": {"service": "gw", "namespace": "edge", "servicePort": 20080, "targetHost": "127.0.0.1"},
                "public": {"port": 20443, "host": "ssh.example.com"},
            },
        )
    )
    assert local.connect_entry() == PangolinEntry(
        host="ssh.example.com", port=20443, target_host="127.0.0.1", target_port=20080
    )


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (
            {"instances": [{"name": "a", "routing": "conect"}]},
            'ssh-gateway:instances[0].routing = "conect": unknown routing; allowed: port, connect; did you mean '
            "'connect'?",
        ),
        ({"routing": "tunnel"}, "ssh-gateway:routing = \"tunnel\": Input should be 'port' or 'connect'"),
        (
            {"connect": None},
            "ssh-gateway:instances[0].routing: instance 'gpu-c' has routing connect, so set ssh-gateway:connect",
        ),
        ({"connect": None, "routing": "connect", "instances": []}, "ssh-gateway:routing: connect needs"),
        (
            {"connect": {"public": {"port": 40010}}},
            "ssh-gateway:connect.public.port: 40010 is inside ports.range 40000-40019",
        ),
        (
            {
                "gateway": {"hostTemplate": "h", "publishedRange": "40000-40100"},
                "connect": {"public": {"port": 40100}},
            },
            "ssh-gateway:connect.public.port: 40100 is inside gateway.publishedRange 40000-40100",
        ),
        (
            {"connect": {"gateway": {"selector": {}}, "public": {"port": 20443}}},
            "ssh-gateway:connect.gateway.selector = {}: the ingress gateway's selector is empty",
        ),
        (
            {"connect": {"gateway": {"selector": {"istio": "-bad"}}, "public": {"port": 20443}}},
            "ssh-gateway:connect.gateway.selector",
        ),
        (
            {"connect": {"public": {"via": "drect", "port": 443}}},
            'ssh-gateway:connect.public.via = "drect": unknown via; allowed: pangolin, direct; did you mean '
            "'direct'?",
        ),
        ({"connect": {"public": {"via": "direct", "port": 443}}}, "ssh-gateway:connect.public.host: required"),
        ({"connect": {}}, "ssh-gateway:connect.public: required"),
        (
            {"connect": {"gateway": {"listnerPort": 1}, "public": {"port": 1}}},
            "ssh-gateway:connect.gateway.listnerPort: unknown key; did you mean 'listenerPort'?",
        ),
        (
            {"connect": {"gateway": {"streamIdleTimeout": 300}, "serverAliveInterval": 300, "public": {"port": 1}}},
            "ssh-gateway:connect.serverAliveInterval: 300 is not below connect.gateway.streamIdleTimeout 300",
        ),
        (
            {
                "instances": [
                    {"name": "a", "routing": "connect", "target": "static", "staticHost": "::1", "staticPort": 22}
                ]
            },
            "ssh-gateway:instances[0].target: instance 'a' has target static, which only connect.gateway.kind envoy "
            "routes to: an Istio gateway routes CONNECT only to cluster Services",
        ),
        (
            {"routing": "connect", "instances": [{"name": "a", "target": "nodePort"}]},
            "ssh-gateway:instances[0].target = \"nodePort\": target 'nodePort' needs routing: port",
        ),
        (
            {"instances": [{"name": "a", "routing": "connect", "port": 40005}]},
            "ssh-gateway:instances[0].port = 40005: port is only for routing: port",
        ),
        (
            {"instances": [{"name": "a", "routing": "connect", "sourceCidrs": ["10.0.0.0/8"]}]},
            "ssh-gateway:instances[0].sourceCidrs",
        ),
        (
            {"instances": [{"name": "a" * 60, "routing": "connect"}]},
            "ssh-gateway:instances[0].name: instance name 'aaaa",
        ),
        (
            {"instances": [{"name": "a", "routing": "connect"}, {"name": "a", "routing": "connect"}]},
            "duplicate name(s) a; each instance needs its own name (its Service, and in connect mode its CONNECT "
            "authority",
        ),
    ],
)
def test_bad_connect_input_is_named(overrides: dict[str, Any], expected: str) -> None:
    assert expected in connect_error(**overrides)


def test_a_connect_port_in_the_ephemeral_ports_is_warned_about() -> None:
    assert not list(parse_settings(connect_raw(ports={"range": "20000-20019"})).warnings())
    found = list(
        parse_settings(connect_raw(ports={"range": "20000-20019"}, connect={"public": {"port": 40443}})).warnings()
    )
    assert [w.split(" is one")[0] for w in found] == ["ssh-gateway:connect.public.port 40443"]


# --- connect.gateway.kind: envoy (a standalone Envoy) -------------------------------------------------------------

ENVOY: dict[str, Any] = {
    "gateway": {"kind": "envoy", "listenerPort": 20080, "targetHost": "127.0.0.1"},
    "public": {"via": "pangolin", "port": 20443},
}
STATIC_C = {"name": "gpu-s", "routing": "connect", "target": "static", "staticHost": "127.0.0.1", "staticPort": 2225}


def envoy_error(**gateway_or_connect: Any) -> str:
    """The error of `ENVOY` with `connect` keys (or, under `gateway`, gateway keys) changed."""
    gateway = {**ENVOY["gateway"], **gateway_or_connect.pop("gateway", {})}
    return connect_error(connect={**ENVOY, "gateway": gateway, **gateway_or_connect}, instances=[STATIC_C])


def test_an_envoy_gateway_routes_static_and_service_instances() -> None:
    settings = parse_settings(connect_raw(connect=ENVOY, instances=[STATIC_C, {"name": "gpu-k", "routing": "connect"}]))
    assert [type(i).__name__ for i in settings.instances] == ["ConnectStaticInstance", "ConnectServiceInstance"]
    assert settings.connect_gateway() == StandaloneEnvoy(listener_port=20080, stream_idle_timeout=300)
    # Pangolin targets the Envoy listener itself (no Service in front of it, unless servicePort says so).
    assert settings.connect_entry() == PangolinEntry(
        host="ssh-connect.example.com", port=20443, target_host="127.0.0.1", target_port=20080
    )
    [static, service] = settings.envoy_routes()
    assert static.instance.authority == "ssh-gpu-s.default.svc.cluster.local"  # the one vocabulary, not resolved
    assert static.upstream == StaticTarget(host="127.0.0.1", port=2225)
    assert service.upstream == ServiceUpstream()
    assert not parse_settings(connect_raw(connect=ENVOY, instances=[STATIC_C])).needs_kubernetes()
    assert parse_settings(connect_raw(connect=ENVOY)).needs_kubernetes()  # a Service target
    assert parse_settings(connect_raw(instances=[])).needs_kubernetes()  # an Istio gateway's EnvoyFilter
    behind = parse_settings(connect_raw(connect={**ENVOY, "gateway": {**ENVOY["gateway"], "servicePort": 80}}))
    assert isinstance(entry := behind.connect_entry(), PangolinEntry) and entry.target_port == 80


def test_a_static_connect_instance_gets_no_secret() -> None:
    settings = parse_settings(connect_raw(connect=ENVOY, instances=[STATIC_C]))
    [inst] = settings.instances
    assert settings.issues_host_key(inst) and not settings.delivers_secret(inst)


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            {"gateway": {"selector": {"istio": "ingressgateway"}}},
            "ssh-gateway:connect.gateway.selector: only for connect.gateway.kind istio; a standalone Envoy has no "
            "Istio: no selector, namespace or Service of its own",
        ),
        ({"gateway": {"namespace": "istio-system"}}, "ssh-gateway:connect.gateway.namespace: only for connect.gateway"),
        ({"gateway": {"service": "gw"}}, "ssh-gateway:connect.gateway.service: only for connect.gateway.kind istio"),
        (
            {"gateway": {"createGateway": True}},
            "ssh-gateway:connect.gateway.createGateway: only for connect.gateway.kind istio",
        ),
        (
            {"enableConnect": False},
            "ssh-gateway:connect.enableConnect: is only for connect.gateway.kind istio (a shared Istio gateway may "
            "have CONNECT on already)",
        ),
        ({"gateway": {"targetHost": None}}, "ssh-gateway:connect.gateway.targetHost"),
        (
            {"gateway": {"kind": "envoi"}},
            "ssh-gateway:connect.gateway.kind = \"envoi\": unknown kind; allowed: istio, envoy; did you mean 'envoy'?",
        ),
        (
            {"gateway": {"listenrPort": 1}},
            "ssh-gateway:connect.gateway.listenrPort: unknown key; did you mean 'listenerPort'?",
        ),
        (
            {"serverAliveInterval": 300},
            "ssh-gateway:connect.serverAliveInterval: 300 is not below connect.gateway.streamIdleTimeout 300 (Envoy's "
            "default): the gateway would close an idle session before ssh's keepalive; use at most 299",
        ),
    ],
)
def test_bad_envoy_gateway_input_is_named(change: dict[str, Any], expected: str) -> None:
    assert expected in envoy_error(**change)


def test_a_targethost_left_out_is_required_for_envoy() -> None:
    gateway = {"kind": "envoy", "listenerPort": 20080}
    message = connect_error(connect={**ENVOY, "gateway": gateway}, instances=[STATIC_C])
    assert "ssh-gateway:connect.gateway.targetHost: required, but not set" in message


def test_an_envoy_only_key_under_istio_is_refused() -> None:
    message = connect_error(connect={**CONNECT, "gateway": {"listenAddress": "127.0.0.1"}})
    assert (
        "ssh-gateway:connect.gateway.listenAddress: only for connect.gateway.kind envoy; an Istio gateway is patched "
        "by EnvoyFilters" in message
    )


@pytest.mark.parametrize(
    ("instance", "expected"),
    [
        (
            {**STATIC_C, "podPort": 2222},
            "ssh-gateway:instances[0].podPort: not a key of target static; a static connect-mode instance is at "
            "staticHost:staticPort (no Service)",
        ),
        (
            {"name": "gpu-s", "routing": "connect", "staticHost": "127.0.0.1"},
            'ssh-gateway:instances[0].staticHost = "127.0.0.1": staticHost is only for target: static',
        ),
        ({**STATIC_C, "port": 20010}, "ssh-gateway:instances[0].port = 20010: port is only for routing: port"),
        (
            {"name": "gpu-s", "routing": "connect", "target": "static", "staticHost": "127.0.0.1"},
            "ssh-gateway:instances[0].staticPort: required, but not set",
        ),
    ],
)
def test_bad_static_connect_instances_are_named(instance: dict[str, Any], expected: str) -> None:
    assert expected in connect_error(connect=ENVOY, instances=[instance])


def test_instance_keys_are_exactly_the_keys_of_the_instance_models() -> None:
    """`INSTANCE_KEYS` (the order `instances add` writes, and its options) cannot drift from the model."""
    from ssh_gateway.core.settings import INSTANCE_KEYS
    from ssh_gateway.core.settings.sections import INSTANCE_MODELS

    keys = {str(f.alias or name) for model in INSTANCE_MODELS for name, f in model.model_fields.items()}
    assert sorted(INSTANCE_KEYS) == sorted(keys)
    assert len(set(INSTANCE_KEYS)) == len(INSTANCE_KEYS)
