"""Bad config fails before anything is registered, naming the key, the value and what is allowed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from ssh_gateway.core.firewall import ServiceTag
from ssh_gateway.core.ports import PortRange
from ssh_gateway.core.settings import (
    FirewallOff,
    FirewallOn,
    HostIdentityOff,
    HostIdentityOn,
    SettingsError,
    StaticInstance,
    decode_config,
    parse_settings,
)

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
            {"firewall": {"resourceGroup": "rg", "nsgName": "n", "sourceCidrs": ["10.0.0.0/8"], "priorityBase": 4090}},
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


@pytest.mark.parametrize("stack", ["local", "dev", "prod"])
def test_committed_stack_files_are_valid(stack: str) -> None:
    document = yaml.safe_load((Path(__file__).parents[2] / "stacks" / f"Pulumi.{stack}.yaml").read_text())
    flat = {k: v if isinstance(v, str) else json.dumps(v) for k, v in document["config"].items()}
    settings = parse_settings(decode_config(flat))
    assert settings.instances
