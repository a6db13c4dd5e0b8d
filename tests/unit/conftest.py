"""Unit layer: Pulumi mocks that record every registration, and pure functions. No processes."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pulumi
import pytest

from providers.port_allocation.provider import PortAllocationProvider
from ssh_gateway.core.names import ALLOCATION_TYPE, PANGOLIN_TYPE, SERVICE_TYPE

ASSIGNED_NODE_PORT = 31022


class RecordingMocks(pulumi.runtime.Mocks):
    """Answers like the real providers would, and keeps what was registered."""

    def __init__(self) -> None:
        self.registered: list[pulumi.runtime.MockResourceArgs] = []

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        self.registered.append(args)
        state = dict(args.inputs)
        if args.typ == ALLOCATION_TYPE:
            # What the engine does with a dynamic resource: its provider's check decides the inputs it keeps.
            checked = PortAllocationProvider().check({}, state)
            if checked.failures:
                raise ValueError("; ".join(f.reason for f in checked.failures))
            state = dict(checked.inputs)
        elif args.typ == PANGOLIN_TYPE:
            state.update(resourceId=7, targetId=9, niceId="calm-otter")
        elif args.typ == SERVICE_TYPE and state["spec"]["type"] == "NodePort":
            port = state["spec"]["ports"][0]
            port.setdefault("nodePort", ASSIGNED_NODE_PORT)
        return f"{args.name}-id", state

    def call(self, _args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], list[Any] | None]:
        return {}, None

    def of_type(self, typ: str) -> list[pulumi.runtime.MockResourceArgs]:
        return [r for r in self.registered if r.typ == typ]


@pytest.fixture
def mocks() -> Iterator[RecordingMocks]:
    recording = RecordingMocks()
    pulumi.runtime.set_mocks(recording, project="ssh-gateway", stack="unit", preview=False)
    yield recording
