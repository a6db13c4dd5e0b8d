"""The stack outputs' contract (ssh_gateway/core/outputs.py): an older program's outputs read with the defaults
the contract names, unknown values refused. (What today's program writes is read back typed in
tests/unit/test_program_connect.py, on the run it already makes.)"""

from __future__ import annotations

from typing import Any

import pytest

from ssh_gateway.core.outputs import (
    ConnectOutput,
    GatewayKind,
    Routing,
    Via,
    read_outputs,
)

pytestmark = pytest.mark.unit


OLD: dict[str, Any] = {
    # As a program before CONNECT routing, `via: direct` and `kind: envoy` wrote them: no `routing`, no `via`,
    # no `gateway.kind`, no `acceptHttp10`.
    "endpoints": {"gpu-01": {"host": "ssh-gpu-01.example.com", "port": 40001, "user": "root", "ssh": "ssh ...",
                             "pangolinResourceId": 3}},
    "connect": {"host": "ssh-connect.example.com", "port": 40443, "gateway": {"listenerPort": 8080}},
    "pangolin": {"url": "https://api.example.com/v1", "orgId": "acme"},
}  # fmt: skip


def test_an_older_programs_outputs_read_with_the_named_defaults() -> None:
    read = read_outputs(OLD)
    assert read.endpoints["gpu-01"].routing is Routing.PORT
    assert read.connect == ConnectOutput(
        via=Via.PANGOLIN,
        host="ssh-connect.example.com",
        port=40443,
        gateway_kind=GatewayKind.ISTIO,
        accept_http10=False,
        gateway={"listenerPort": 8080},
    )
    assert (read.ssh_config, read.known_hosts, read.envoy_config, read.has_ssh_config) == ("", "", "", False)


def test_an_unknown_routing_or_kind_is_refused_not_guessed() -> None:
    with pytest.raises(ValueError, match="'tunnel' is not a valid Routing"):
        read_outputs({"endpoints": {"a": {**OLD["endpoints"]["gpu-01"], "routing": "tunnel"}}})
    with pytest.raises(ValueError, match="'nginx' is not a valid GatewayKind"):
        read_outputs({"connect": {**OLD["connect"], "gateway": {"kind": "nginx"}}})


def test_the_settings_routings_and_kinds_are_the_enums() -> None:
    from ssh_gateway.core.settings import KINDS, ROUTINGS

    assert ROUTINGS == tuple(Routing) and KINDS == tuple(GatewayKind)
