"""Bad config fails before anything is registered, naming the key, the value and what is allowed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.settings import SettingsError, decode_config, parse_settings

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
    assert settings.ports.port_range.start == 40000
    assert settings.instances[0].user == "root"


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
            {"firewall": {"enabled": True, "resourceGroup": "rg", "nsgName": "n", "sourceCidrs": ["10.0.0.0/33"]}},
            'ssh-gateway:firewall.sourceCidrs[0] = "10.0.0.0/33"',
        ),
        ({"firewall": {"enabled": True, "sourceCidrs": ["10.0.0.0/8"]}}, "resourceGroup, nsgName is not set"),
        ({"colour": "blue"}, 'ssh-gateway:colour = "blue": unknown key'),
        ({"ports": {"range": "40000-40019", "reserve": [1]}}, "ssh-gateway:ports.reserve"),
        ({"pangolin": {"url": "ftp://x", "orgId": "acme", "siteId": 1}}, 'ssh-gateway:pangolin.url = "ftp://x"'),
        ({"gateway": {"hostTemplate": "ssh {instance}"}}, "ssh-gateway:gateway.hostTemplate"),
        (
            {"gateway": {"hostTemplate": "h", "publishedRange": "40000-40009"}},
            "ports.range 40000-40019 is not inside gateway.publishedRange 40000-40009",
        ),
        ({"instances": [{"name": "a", "target": "nodePort"}]}, "kubernetes.nodeIp is not set"),
        ({"instances": [{"name": "a", "target": "static"}]}, "target static but no staticHost/staticPort"),
    ],
)
def test_bad_input_is_named(overrides: dict[str, Any], expected: str) -> None:
    assert expected in error(**overrides)


def test_every_problem_is_reported_at_once() -> None:
    message = error(ports={"range": "1-0"}, instances=[{"name": "Bad", "target": "clusterIp"}])
    assert "ssh-gateway:ports.range" in message and "ssh-gateway:instances[0].name" in message


def test_decode_config_takes_only_this_namespace() -> None:
    decoded = decode_config(
        {"ssh-gateway:ports": '{"range": "1-2"}', "ssh-gateway:production": "true", "pangolin:apiKey": "k.s"}
    )
    assert decoded == {"ports": {"range": "1-2"}, "production": True}


@pytest.mark.parametrize("stack", ["local", "dev", "prod"])
def test_committed_stack_files_are_valid(stack: str) -> None:
    document = yaml.safe_load((Path(__file__).parents[2] / "stacks" / f"Pulumi.{stack}.yaml").read_text())
    flat = {k: v if isinstance(v, str) else json.dumps(v) for k, v in document["config"].items()}
    settings = parse_settings(decode_config(flat))
    assert settings.instances
