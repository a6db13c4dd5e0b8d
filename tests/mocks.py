"""Pulumi mocks that answer like the real providers and record every registration (unit and provider tests)."""

from __future__ import annotations

from typing import Any

import pulumi
from pulumi.output import Unknown

from providers.host_identity import SshHostCaProvider, SshHostKeyRootProvider
from providers.port_allocation.provider import PortAllocationProvider
from ssh_gateway.core.names import ALLOCATION_TYPE, HOST_CA_TYPE, HOST_KEY_ROOT_TYPE, PANGOLIN_TYPE, SERVICE_TYPE

NSG_READ = "azure-native:network:getNetworkSecurityGroup"
"""azure-native's read of a network security group (an invoke), which the program's firewall check makes."""

ASSIGNED_NODE_PORT = 31022
"""The nodePort the mocked API server assigns to a NodePort Service."""


_SECRET_SIG = ("4dabf18193072939515e22adb298388d", "1b47061264138c4ac30d75fd1eb44270")
"""How the mocks hand a secret input over: {sig key: secret sig, "value": ...} (Pulumi's `rpc` module)."""


def revealed(value: Any) -> Any:
    """A mocked input with its secret wrapping removed, as the engine hands it to a dynamic provider."""
    if isinstance(value, dict):
        if value.get(_SECRET_SIG[0]) == _SECRET_SIG[1]:
            return revealed(value["value"])
        return {k: revealed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [revealed(v) for v in value]
    return value


class RecordingMocks(pulumi.runtime.Mocks):
    """Answers like the real providers would, and keeps what was registered."""

    def __init__(self) -> None:
        self.registered: list[pulumi.runtime.MockResourceArgs] = []
        self.nsg_rules: list[dict[str, Any]] | None = []
        """What azure-native's `getNetworkSecurityGroup` answers as the NSG's `securityRules` (Azure's property
        names); None: the NSG is not there, and the read fails as azure-native's does on a 404."""
        self.calls: list[pulumi.runtime.MockCallArgs] = []
        self.kept: dict[tuple[str, Any], dict[str, Any]] = {}
        """Each CA and host-key root drawn, by name: kept across runs, as the engine keeps them in state."""

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        self.registered.append(args)
        state = dict(args.inputs)
        if args.typ == ALLOCATION_TYPE:
            # What the engine does with a dynamic resource: its provider's check decides the inputs it keeps.
            checked = PortAllocationProvider().check({}, state)
            if checked.failures:
                raise ValueError("; ".join(f.reason for f in checked.failures))
            state = dict(checked.inputs)
        elif args.typ in (HOST_CA_TYPE, HOST_KEY_ROOT_TYPE):
            # The real providers: a CA, or the root the program derives every instance's key from.
            if (args.name, state["generation"]) not in self.kept:
                provider = SshHostCaProvider() if args.typ == HOST_CA_TYPE else SshHostKeyRootProvider()
                self.kept[args.name, state["generation"]] = dict(provider.create(state).outs or {})
            state = dict(self.kept[args.name, state["generation"]])
        elif args.typ == PANGOLIN_TYPE:
            state.update(resourceId=7, targetId=9, niceId="calm-otter")
        elif args.typ == SERVICE_TYPE and state["spec"]["type"] == "NodePort":
            port = state["spec"]["ports"][0]
            port.setdefault("nodePort", ASSIGNED_NODE_PORT)
        return f"{args.name}-id", state

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], list[Any]]:
        # No failures is an empty list: the SDK's mock monitor iterates it (None fails there).
        self.calls.append(args)
        if args.token == NSG_READ:
            if self.nsg_rules is None:
                raise RuntimeError(f"NotFound: network security group {args.args['networkSecurityGroupName']!r}")
            return {"name": args.args["networkSecurityGroupName"], "securityRules": self.nsg_rules}, []
        return {}, []

    def of_type(self, typ: str) -> list[pulumi.runtime.MockResourceArgs]:
        return [r for r in self.registered if r.typ == typ]


def unknown() -> object:
    """A value the preview does not know yet, the way the provider server hands it to check and diff."""
    return Unknown()  # type: ignore[no-untyped-call]  # the SDK's Unknown() is unannotated
