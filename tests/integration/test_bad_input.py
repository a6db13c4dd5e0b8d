"""Bad stack config as a user would write it: refused at preview through the real CLI, as one clean error naming
the key and the value, with no traceback and no API write."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from pulumi import automation as auto

from pangolin_emulator.harness import EmulatorHandle

from .conftest import StackFactory, stack_config, static_instance

pytestmark = pytest.mark.integration

FIREWALL = {"resourceGroup": "rg", "nsgName": "nsg"}
LONG = "g" * 60  # a DNS label, but ssh-<name> is not one

CASES: list[tuple[str, dict[str, Any], str]] = [
    (
        "misspelt key",
        {"ports": {"rnage": "40000-40019"}},
        "ssh-gateway:ports.rnage: unknown key; did you mean 'range'?",
    ),
    ("mistyped IP", {"kubernetes": {"nodeIp": "10.0.0.256"}}, 'ssh-gateway:kubernetes.nodeIp = "10.0.0.256"'),
    (
        "service tag with CIDRs",
        {"firewall": {**FIREWALL, "sourceCidrs": ["Internet", "10.0.0.0/8"]}},
        "mixes the service tag 'Internet' with other sources",
    ),
    ("URL without host", {"pangolin": {"url": "https://user@/v1", "orgId": "acme", "siteId": 1}}, "pangolin.url"),
    ("uppercase org", {"pangolin": {"url": "http://127.0.0.1:9/v1", "orgId": "ACME", "siteId": 1}}, "orgId"),
    ("unknown target", {"instances": [{"name": "a", "target": "vm"}]}, 'ssh-gateway:instances[0].target = "vm"'),
    (
        "no port range for a port-mode instance",
        {"ports": {}},
        "ssh-gateway:ports.range: required: instance 'a' (instances[0]) has routing port, so it needs a public port",
    ),
    (
        "CONNECT port inside the range",
        {"connect": {"public": {"port": 40005}}},
        "ssh-gateway:connect.public.port: 40005 is inside ports.range 40000-40019",
    ),
    (
        "empty gateway selector",
        {"connect": {"gateway": {"selector": {}}, "public": {"port": 40443}}},
        "ssh-gateway:connect.gateway.selector = {}: the ingress gateway's selector is empty",
    ),
    (
        "unknown routing",
        {"instances": [{"name": "a", "routing": "tunnel"}]},
        'ssh-gateway:instances[0].routing = "tunnel": unknown routing; allowed: port, connect',
    ),
    (
        "connect without its section",
        {"routing": "connect", "instances": [{"name": "a"}]},
        "ssh-gateway:routing: connect needs ssh-gateway:connect",
    ),
    (
        "static target behind Istio",
        {"routing": "connect", "connect": {"public": {"port": 40443}}},  # the stack's one instance is static
        "ssh-gateway:instances[0].target: instance 'a' has target static, which only connect.gateway.kind envoy "
        "routes to: an Istio gateway routes CONNECT only to cluster Services",
    ),
    (
        "Istio key under kind envoy",
        {
            "connect": {
                "gateway": {"kind": "envoy", "targetHost": "10.0.0.9", "selector": {}},
                "public": {"port": 40443},
            }
        },
        "ssh-gateway:connect.gateway.selector: only for connect.gateway.kind istio",
    ),
    (
        "Service name over 63",
        {"instances": [{"name": LONG, "target": "clusterIp"}]},
        f"ssh-gateway:instances[0].name: instance '{LONG}' makes the Service name 'ssh-{LONG}' (64 characters), over "
        "the 63 of a Kubernetes Service name (a DNS-1035 label): use at most 59 characters",
    ),
    (
        "public host label over 63",
        {"instances": [static_instance(LONG)]},
        f"ssh-gateway:instances[0].name: instance '{LONG}' makes the public host (gateway.hostTemplate) "
        f"'ssh-{LONG}.example.test', whose label 'ssh-{LONG}' has 64 characters, over DNS's 63",
    ),
    (
        "CONNECT authority over 253",
        {
            "instances": [{"name": "c" * 59, "routing": "connect"}],
            "connect": {"public": {"port": 40443}},
            "kubernetes": {"namespace": "n" * 63, "clusterDomain": ".".join(["d" * 60] * 3)},
        },
        f"ssh-gateway:instances[0].name: instance '{'c' * 59}' makes the CONNECT authority 'ssh-{'c' * 59}.",
    ),
    (
        "CONNECT entry's host label over 63",
        {
            "gateway": {"hostTemplate": "{instance}" + "x" * 57 + ".example.test"},
            "connect": {"public": {"port": 40443}},
        },
        "ssh-gateway:gateway.hostTemplate: the CONNECT entry's public host (gateway.hostTemplate) 'connect",
    ),
]


def _refusal(stack: auto.Stack) -> str:
    with pytest.raises(auto.CommandError) as raised:
        stack.preview()
    return str(raised.value)


@pytest.mark.parametrize(("case", "overrides", "expected"), CASES, ids=[c[0] for c in CASES])
def test_refused_at_preview_naming_the_key_without_traceback(
    emulator: EmulatorHandle, make_stack: StackFactory, case: str, overrides: dict[str, Any], expected: str
) -> None:
    config = stack_config(emulator, [static_instance("a")])
    config.update({f"ssh-gateway:{key}": value for key, value in overrides.items()})
    emulator.reset_counters()
    message = _refusal(make_stack(config))
    assert expected in message, message
    assert "Traceback" not in message and "unhandled" not in message and "exit code" not in message, message
    assert not [route for route, n in emulator.counters().items() if n and not route.startswith("GET ")]


def test_a_connect_port_bound_by_another_resource_is_refused(
    emulator: EmulatorHandle, make_stack: StackFactory
) -> None:
    httpx.put(
        f"{emulator.url}/org/{emulator.org_id}/resource",
        json={"name": "team-b/postgres", "mode": "tcp", "proxyPort": 40443},
        headers={"Authorization": f"Bearer {emulator.api_key}"},
        timeout=10,
    ).raise_for_status()
    [theirs] = emulator.state()["resources"]
    config = stack_config(emulator, [{"name": "c", "routing": "connect"}], connect={"public": {"port": 40443}})
    emulator.reset_counters()
    message = _refusal(make_stack(config))
    expected = f"ssh-gateway:connect.public.port 40443 is already bound by Pangolin resource {theirs['resourceId']}"
    assert f"{expected} 'team-b/postgres'" in message, message
    assert "Traceback" not in message
    assert not [route for route, n in emulator.counters().items() if n and not route.startswith("GET ")]


def test_a_malformed_api_key_is_named_not_blamed_on_the_org(
    emulator: EmulatorHandle, make_stack: StackFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PANGOLIN_API_KEY", raising=False)
    stack = make_stack(stack_config(emulator, [static_instance("a")]))
    stack.set_config("pangolin:apiKey", auto.ConfigValue("not-a-key", secret=True))
    message = _refusal(stack)
    assert "pangolin:apiKey is not a Pangolin API key: expected <keyId>.<secret>" in message, message
    assert "not-a-key" not in message and "Traceback" not in message


def test_an_exhausted_range_is_one_short_line_naming_the_key(
    emulator: EmulatorHandle, make_stack: StackFactory
) -> None:
    instances = [static_instance(f"gpu-{i:02d}") for i in range(55)]
    emulator.reset_counters()
    message = _refusal(make_stack(stack_config(emulator, instances, port_range="20000-20009")))
    [line] = {line.split("error: ", 1)[-1] for line in message.splitlines() if "is exhausted" in line}
    assert "ssh-gateway:ports.range 20000-20009 is exhausted: no free port for instances 'gpu-10'" in line, line
    assert len(line) < 400, line
    assert "Traceback" not in message
    assert not [route for route, n in emulator.counters().items() if n and not route.startswith("GET ")]


def test_a_range_in_the_ephemeral_ports_is_warned_about(emulator: EmulatorHandle, make_stack: StackFactory) -> None:
    preview = make_stack(stack_config(emulator, [static_instance("a")], port_range="40000-40019")).preview()
    assert "ssh-gateway:ports.range 40000-40019 overlaps Linux's ephemeral ports 32768-60999" in preview.stdout
