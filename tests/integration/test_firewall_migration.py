"""A stack moves from one NSG rule per instance to merged rules (`firewall.rules: merged`) with no moment in which
a live instance's port is closed: the real CLI, the Azure stand-in (fake_azure.py), its rules sampled throughout."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from pangolin_emulator.harness import EmulatorHandle
from ssh_gateway.core.firewall import ports_of
from ssh_gateway.core.names import merged_rule_name, nsg_rule_name

from .conftest import StackFactory, stack_config, static_instance
from .fake_azure import FakeAzure
from .sampler import Probe, Sampler

pytestmark = pytest.mark.integration

FIREWALL = {"resourceGroup": "rg-gw", "nsgName": "nsg-gw", "sourceCidrs": ["203.0.113.0/24"], "priorityBase": 1000}


def _rules(azure: FakeAzure) -> list[dict[str, Any]]:
    with azure.lock:
        return [dict(r) for r in azure.objects.values()]


def _allowed(rules: list[dict[str, Any]]) -> set[int]:
    return {
        p
        for r in rules
        if str(r.get("direction")) == "Inbound" and str(r.get("access")) == "Allow"
        for p in ports_of([r.get("destinationPortRange") or "", *(r.get("destinationPortRanges") or [])])
    }


def test_moving_to_merged_rules_never_closes_a_live_port(
    azure_native: str, fake_azure: FakeAzure, emulator: EmulatorHandle, make_stack: StackFactory
) -> None:
    assert azure_native
    instances = [static_instance(f"i{n}") for n in range(10)]
    instances.append(static_instance("vip", sourceCidrs=["198.51.100.9/32"]))  # a rule of its own sources
    per_instance = stack_config(emulator, instances, firewall={**FIREWALL, "rules": "perInstance"})
    stack = make_stack(per_instance)
    stack.up()
    live = {name: int(port) for name, port in stack.outputs()["allocations"].value.items()}
    assert fake_azure.rule_names() == sorted(nsg_rule_name(n) for n in live)

    merged = stack_config(emulator, instances, firewall={**FIREWALL, "rules": "merged"})
    make_stack(merged, name=stack.name)
    project = "ssh-gateway"
    default = merged_rule_name(project, stack.name, "")
    held = fake_azure.hold_after_create(default)  # the engine learns of the new rule only when released

    def every_live_port_allowed() -> str | None:
        closed = sorted(set(live.values()) - _allowed(_rules(fake_azure)))
        return f"ports {closed} closed" if closed else None

    def one_rule_per_priority() -> str | None:
        priorities = [int(r["priority"]) for r in _rules(fake_azure) if r.get("direction") == "Inbound"]
        twice = sorted({p for p in priorities if priorities.count(p) > 1})
        return f"priorities {twice} held twice" if twice else None

    outcome: list[BaseException] = []

    def up() -> None:
        try:
            stack.up()
        except BaseException as exc:  # re-raised below, in the test's thread
            outcome.append(exc)

    probes = [Probe("every live port allowed", every_live_port_allowed), Probe("priorities", one_rule_per_priority)]
    with Sampler(probes, interval=0.005) as sampler:
        runner = threading.Thread(target=up)
        runner.start()
        assert held.wait(timeout=300), "the merged rule's create never came"
        time.sleep(1.0)  # were the old rules deleted beside the create, they would go now
        old_during_hold = [n for n in fake_azure.rule_names() if n.startswith("ssh-gateway-")]
        fake_azure.release()
        runner.join(timeout=300)
    if outcome:
        raise outcome[0]

    # Pulumi deletes what the program no longer registers only after every create of the update.
    assert old_during_hold == sorted(nsg_rule_name(n) for n in live)
    assert sampler.samples > 50, sampler.samples
    assert not sampler.errors and not sampler.findings, (sampler.errors, sampler.findings[:5])
    after = {r["name"]: r for r in _rules(fake_azure)}
    [own] = set(after) - {default}
    assert own.startswith(f"{default}-")
    assert ports_of(after[default]["destinationPortRanges"]) == {p for n, p in live.items() if n != "vip"}
    assert ports_of(after[own]["destinationPortRanges"]) == {live["vip"]}
    assert {name: int(port) for name, port in stack.outputs()["allocations"].value.items()} == live
