"""`PortAllocationProvider.check` as the engine calls it: the table from the previous one, `held` consumed."""

from __future__ import annotations

from typing import Any

import pytest

from providers.port_allocation.provider import PortAllocationProvider
from tests.mocks import unknown

pytestmark = pytest.mark.unit

NEWS: dict[str, Any] = {
    "instances": ["a", "b", "c"],
    "start": 40000.0,
    "end": 40009.0,
    "pins": {},
    "reserved": [40000.0],
    "held": {
        "40001": [{"id": 12.0, "name": "db-proxy", "protocol": "tcp", "enabled": True}],
        "40002": [{"id": 13.0, "name": "ssh-gateway/dev/b", "protocol": "tcp", "enabled": True}],
    },
    "ownerPrefix": "ssh-gateway/dev/",
    "ports": None,
    "released": None,
}


def test_held_ports_steer_the_table_and_are_not_kept() -> None:
    olds = {"ports": {"b": 40002.0}, "released": []}
    result = PortAllocationProvider().check(olds, dict(NEWS))
    assert result.failures == []
    # 40001 is someone else's; 40002 is b's own resource; the table never stores `held`.
    assert result.inputs["ports"] == {"a": 40003, "b": 40002, "c": 40004}
    assert "held" not in result.inputs


def test_unknown_inputs_pass_through_in_preview() -> None:
    result = PortAllocationProvider().check({}, {**NEWS, "instances": [unknown()]})
    assert result.failures == [] and result.inputs["ports"] is None


def test_refusals_carry_no_property_so_the_engine_prints_the_reason_alone() -> None:
    result = PortAllocationProvider().check({}, {**NEWS, "instances": [f"i{n}" for n in range(20)]})
    [failure] = result.failures
    assert failure.property == "" and failure.reason.startswith("ssh-gateway:ports.range 40000-40009 is exhausted")
