"""Every name derived from an instance is checked at parse time (so at preview), one line naming the instance,
the derived name and the limit."""

from __future__ import annotations

from typing import Any

import pytest

from ssh_gateway.core.settings import SettingsError, parse_settings
from ssh_gateway.core.settings.derived_names import (
    check_derived_names,
    dns_name_problem,
    nsg_rule_problem,
    secret_problem,
    service_problem,
)

pytestmark = pytest.mark.unit

STATIC = {"target": "static", "staticHost": "10.0.0.5", "staticPort": 22}


def _raw(instance: dict[str, Any], **overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "pangolin": {"url": "http://127.0.0.1:3003/v1", "orgId": "acme", "siteId": 1},
        "ports": {"range": "40000-40019"},
        "gateway": {"hostTemplate": "ssh-{instance}.example.com"},
        "kubernetes": {"nodeIp": "10.0.0.4"},
        "instances": [instance],
    }
    return {**base, **overrides}


def _refusal(instance: dict[str, Any], **overrides: Any) -> str:
    with pytest.raises(SettingsError) as raised:
        check_derived_names(parse_settings(_raw(instance, **overrides)))
    [line] = str(raised.value).splitlines()[1:]
    return line.strip()


@pytest.mark.parametrize("target", ["nodePort", "clusterIp"])
def test_a_60_character_name_is_refused_for_its_service_name(target: str) -> None:
    name = "g" * 60
    line = _refusal({"name": name, "target": target})
    assert line == (
        f"ssh-gateway:instances[0].name: instance '{name}' makes the Service name 'ssh-{name}' (64 characters), over "
        "the 63 of a Kubernetes Service name (a DNS-1035 label): use at most 59 characters"
    )


def test_59_characters_make_a_service_name_of_63_which_passes() -> None:
    check_derived_names(parse_settings(_raw({"name": "g" * 59})))


def test_a_static_instance_has_no_service_but_its_public_host_label_is_checked() -> None:
    name = "s" * 60
    line = _refusal({"name": name, **STATIC})
    assert line.startswith(f"ssh-gateway:instances[0].name: instance '{name}' makes the public host ")
    assert f"whose label 'ssh-{name}' has 64 characters, over DNS's 63" in line, line


def test_the_host_template_can_make_a_label_too_long_for_a_short_name() -> None:
    line = _refusal({"name": "gpu-01", **STATIC}, gateway={"hostTemplate": "{instance}-" + "x" * 57 + ".example.com"})
    assert "instance 'gpu-01' makes the public host (gateway.hostTemplate)" in line, line
    assert "has 64 characters, over DNS's 63" in line, line


def test_a_public_host_over_253_characters_is_refused() -> None:
    template = "ssh-{instance}." + ".".join(["d" * 60] * 3) + ".example.com"  # 200 characters with 'x'
    line = _refusal({"name": "g" * 55, **STATIC}, gateway={"hostTemplate": template})
    assert "characters, over DNS's 253 for a name" in line, line


def test_the_connect_authority_is_checked_as_a_dns_name() -> None:
    connect = {"public": {"port": 40443}}
    kubernetes = {"namespace": "n" * 63, "clusterDomain": ".".join(["d" * 60] * 3)}
    line = _refusal({"name": "c" * 59, "routing": "connect"}, connect=connect, kubernetes=kubernetes)
    assert line.startswith(f"ssh-gateway:instances[0].name: instance '{'c' * 59}' makes the CONNECT authority ")
    assert "over DNS's 253 for a name" in line, line
    too_long = _refusal({"name": "c" * 60, "routing": "connect"}, connect=connect)
    assert "instance name" in too_long and "1-59" in too_long, too_long  # parse_settings' own check comes first


def test_the_connect_entry_public_host_comes_from_the_template() -> None:
    template = "{instance}" + "x" * 57 + ".example.com"  # 'connect' + 57 = 64
    line = _refusal(
        {"name": "a", "routing": "connect"}, connect={"public": {"port": 40443}}, gateway={"hostTemplate": template}
    )
    assert line.startswith("ssh-gateway:gateway.hostTemplate: the CONNECT entry's public host"), line
    # An explicit connect.public.host is the entry's name instead, and the template is not used for it.
    check_derived_names(
        parse_settings(
            _raw(
                {"name": "a", "routing": "connect"},
                connect={"public": {"port": 40443, "host": "connect.example.com"}},
                gateway={"hostTemplate": template},
            )
        )
    )


def test_the_secret_and_nsg_rule_names_follow_kubernetes_and_azure_rules() -> None:
    assert secret_problem("g" * 63) is None  # ssh-<63>-host-key: 75 characters, a DNS-1123 subdomain
    assert "not a DNS-1123 subdomain of at most 253" in (secret_problem("g" * 241) or "")
    assert "not a DNS-1123 subdomain" in (secret_problem("Upper") or "")
    assert nsg_rule_problem("g" * 63) is None  # ssh-gateway-<63>: 75 characters
    assert "(81 characters), which Azure refuses: 1-80" in (nsg_rule_problem("g" * 69) or "")
    assert nsg_rule_problem("bad/char") is not None
    assert service_problem("9lives") is None  # the ssh- prefix starts it with a letter
    assert dns_name_problem("host", "a." * 100 + "example.com") is None
