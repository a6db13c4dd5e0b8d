"""Pulumi mocks that answer like the real providers and record every registration (unit and provider tests)."""

from __future__ import annotations

from typing import Any

import pulumi
from pulumi.output import Unknown

from providers.port_allocation.provider import PortAllocationProvider
from ssh_gateway.core.names import ALLOCATION_TYPE, PANGOLIN_TYPE, SERVICE_TYPE

ASSIGNED_NODE_PORT = 31022
"""The nodePort the mocked API server assigns to a NodePort Service."""


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


def unknown() -> object:
    """A value the preview does not know yet, the way the provider server hands it to check and diff."""
    return Unknown()  # type: ignore[no-untyped-call]  # the SDK's Unknown() is unannotated
