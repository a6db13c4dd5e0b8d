"""The stack outputs' contract (ssh_gateway/core/outputs.py): the program writes exactly the keys it declares
and they read back typed; an older program's outputs read with the defaults the contract names, unknown values
refused."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ssh_gateway.core.outputs import (
    ConnectGatewayKey,
    ConnectKey,
    ConnectOutput,
    EndpointKey,
    GatewayKey,
    GatewayKind,
    GatewayOutput,
    HostCaKey,
    OutputKey,
    PangolinKey,
    Routing,
    Via,
    parse_stack_outputs,
    traefik_entry_point,
)

from .conftest import RecordingMocks
from .test_program import run_program
from .test_program_connect import ENVOY, MIXED, STATIC_CONNECT, connect_settings

pytestmark = pytest.mark.unit


PINNED = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAi5LozFLqWuY6k4TyD1C+Oys0CW2N2WqpjyAxjMsw+d"

OLD: dict[str, Any] = {
    # As a program before CONNECT routing, `via: direct` and `kind: envoy` wrote them: no `routing`, no `via`,
    # no `gateway.kind`, no `acceptHttp10`.
    "endpoints": {"gpu-01": {"host": "ssh-gpu-01.example.com", "port": 40001, "user": "root", "ssh": "ssh ...",
                             "pangolinResourceId": 3}},
    "connect": {"host": "ssh-connect.example.com", "port": 40443, "gateway": {"listenerPort": 8080}},
    "pangolin": {"url": "https://api.example.com/v1", "orgId": "acme"},
}  # fmt: skip


def test_an_older_programs_outputs_read_with_the_named_defaults() -> None:
    read = parse_stack_outputs(OLD)
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
        parse_stack_outputs({"endpoints": {"a": {**OLD["endpoints"]["gpu-01"], "routing": "tunnel"}}})
    with pytest.raises(ValueError, match="'nginx' is not a valid GatewayKind"):
        parse_stack_outputs({"connect": {**OLD["connect"], "gateway": {"kind": "nginx"}}})


def test_the_settings_routings_and_kinds_are_the_enums() -> None:
    from ssh_gateway.core.settings import KINDS, ROUTINGS

    assert ROUTINGS == tuple(Routing) and KINDS == tuple(GatewayKind)


# --- the contract both ways: what the program writes is exactly what is declared, and reads back typed ----------


def _written(runs: list[dict[str, Any]]) -> dict[str, set[str]]:
    """Every key the runs wrote, by where it sits (as `pulumi stack output --json` prints them: plain JSON)."""
    keys: dict[str, set[str]] = {name: set() for name in ("", "endpoint", "pangolin", "hostCa", "gateway", "entry")}
    keys.update({"connect": set(), "connect.gateway": set()})
    for out in runs:
        keys[""] |= set(out)
        keys["pangolin"] |= set(out[OutputKey.PANGOLIN])
        keys["gateway"] |= set(out[OutputKey.GATEWAY])
        for endpoint in out[OutputKey.ENDPOINTS].values():
            keys["endpoint"] |= set(endpoint)
        for ca in out[OutputKey.HOST_CA]:
            keys["hostCa"] |= set(ca)
        for entry in out[OutputKey.GATEWAY][GatewayKey.TRAEFIK_ENTRY_POINTS].values():
            keys["entry"] |= set(entry)
        if OutputKey.CONNECT in out:
            keys["connect"] |= set(out[OutputKey.CONNECT])
            keys["connect.gateway"] |= set(out[OutputKey.CONNECT][ConnectKey.GATEWAY])
    return keys


def test_the_program_writes_every_declared_key_and_only_those(mocks: RecordingMocks) -> None:
    # Two stacks between them write every key: port- and connect-mode instances with issued and pinned host keys,
    # behind Istio (EnvoyFilters) through Pangolin, and behind a standalone Envoy (its `envoyConfig`).
    pinned = [{**MIXED[2], "hostKey": PINNED}]  # a plain knownHosts line and a hostKeys entry beside the issued
    istio = json.loads(json.dumps(run_program(connect_settings(instances=[*MIXED[:2], *pinned]))))
    envoy = json.loads(json.dumps(run_program(connect_settings(connect=ENVOY, instances=STATIC_CONNECT))))
    written = _written([istio, envoy])
    declared: dict[str, set[str]] = {
        "": set(OutputKey),
        "endpoint": set(EndpointKey),
        "pangolin": set(PangolinKey),
        "hostCa": set(HostCaKey),
        "gateway": set(GatewayKey),
        "entry": set(traefik_entry_point(1)),
        "connect": set(ConnectKey),
        "connect.gateway": set(ConnectGatewayKey),
    }
    for where, keys in declared.items():
        assert written[where] - keys == set(), f"written at {where or 'top level'} but not declared in core/outputs.py"
        assert keys - written[where] == set(), f"declared at {where or 'top level'} but never written"
    assert istio[OutputKey.HOST_KEYS] and istio[OutputKey.KNOWN_HOSTS] and envoy[OutputKey.ENVOY_CONFIG]

    for out in (istio, envoy):
        read = parse_stack_outputs(out)
        assert list(read.endpoints) == sorted(out[OutputKey.ENDPOINTS])
        for name, endpoint in read.endpoints.items():
            raw = out[OutputKey.ENDPOINTS][name]
            assert (endpoint.routing, endpoint.host, endpoint.port, endpoint.user, endpoint.ssh) == (
                raw[EndpointKey.ROUTING],
                raw[EndpointKey.HOST],
                raw[EndpointKey.PORT],
                raw[EndpointKey.USER],
                raw[EndpointKey.SSH],
            )
            assert (endpoint.pangolin_resource_id, endpoint.authority, endpoint.route) == (
                raw[EndpointKey.PANGOLIN_RESOURCE_ID],
                raw.get(EndpointKey.AUTHORITY),
                raw.get(EndpointKey.ROUTE),
            )
        assert read.pangolin_url == out[OutputKey.PANGOLIN][PangolinKey.URL]
        assert (read.ssh_config, read.known_hosts, read.has_ssh_config) == (
            out[OutputKey.SSH_CONFIG],
            out[OutputKey.KNOWN_HOSTS],
            True,
        )
        assert read.envoy_config == out.get(OutputKey.ENVOY_CONFIG, "")
        assert read.allocations == out[OutputKey.ALLOCATIONS] and read.allocations
        assert str(read.port_range) == out[OutputKey.PORT_RANGE]
        gateway = out[OutputKey.GATEWAY]
        assert read.gateway == GatewayOutput(
            traefik_entry_points=gateway[GatewayKey.TRAEFIK_ENTRY_POINTS],
            gerbil_published_ports=gateway[GatewayKey.GERBIL_PUBLISHED_PORTS],
            gerbil_connect_port=gateway[GatewayKey.GERBIL_CONNECT_PORT],
        )
        connect = out[OutputKey.CONNECT]
        assert read.connect == ConnectOutput(
            via=Via(connect[ConnectKey.VIA]),
            host=connect[ConnectKey.HOST],
            port=connect[ConnectKey.PORT],
            gateway_kind=GatewayKind(connect[ConnectKey.GATEWAY][ConnectGatewayKey.KIND]),
            accept_http10=connect[ConnectKey.ACCEPT_HTTP10],
            pangolin_resource_id=connect[ConnectKey.PANGOLIN_RESOURCE_ID],
            gateway=connect[ConnectKey.GATEWAY],
        )
