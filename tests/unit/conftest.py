"""Unit layer: Pulumi mocks that record every registration, and pure functions. No processes."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pulumi
import pytest

from providers.port_allocation.allocate import AllocationState, PortRange, allocate

ALLOCATION_TYPE = "pulumi-python:dynamic/ssh-gateway:PortAllocation"
PANGOLIN_TYPE = "pulumi-python:dynamic/pangolin:TcpResource"
ASSIGNED_NODE_PORT = 31022


class RecordingMocks(pulumi.runtime.Mocks):
    """Answers like the real providers would, and keeps what was registered."""

    def __init__(self) -> None:
        self.registered: list[pulumi.runtime.MockResourceArgs] = []

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        self.registered.append(args)
        state = dict(args.inputs)
        if args.typ == ALLOCATION_TYPE:
            # What the provider's check computes, minus the Pangolin listing.
            start, end = (int(p) for p in state["range"].split("-"))
            table = allocate(
                instances=state["instances"],
                port_range=PortRange(start=start, end=end),
                pins={k: int(v) for k, v in state["pins"].items()},
                reserved=[int(p) for p in state["reserved"]],
                previous=AllocationState(ports={}, released=()),
            )
            state.update(ports=dict(table.ports), released=list(table.released))
        elif args.typ == PANGOLIN_TYPE:
            state.update(resourceId=7, targetId=9, niceId="calm-otter")
        elif args.typ == "kubernetes:core/v1:Service" and state["spec"]["type"] == "NodePort":
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
