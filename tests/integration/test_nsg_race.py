"""Shards racing on one NSG's priorities (issues 30 and 36). Shards whose `ports.range`s are slices of one
`gateway.publishedRange` take their rules' priorities from disjoint bands, so ten whose `up`s all read the NSG
before any of them creates its rule still succeed at once. Two stacks that share no published range take from
one band: when both `up`s read the NSG before either writes, Azure refuses the second write; that `up` fails
before its rule exists, and its next `up` reads the winner's rule and takes another priority. The real CLI, the
Azure stand-in (fake_azure.py), which refuses two inbound rules at one priority as Azure does."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from pangolin_emulator.harness import EmulatorHandle
from ssh_gateway.core.names import merged_rule_name

from .conftest import StackFactory, stack_config, static_instance
from .fake_azure import FakeAzure

pytestmark = pytest.mark.integration

FIREWALL = {"resourceGroup": "rg-gw", "nsgName": "nsg-gw", "sourceCidrs": ["203.0.113.0/24"]}  # default priorityBase
SHARDS = 10
PUBLISHED = "40000-40199"


def test_ten_shards_whose_ups_all_read_the_nsg_before_any_writes_all_succeed_at_once(
    azure_native: str, fake_azure: FakeAzure, emulator: EmulatorHandle, make_stack: StackFactory
) -> None:
    assert azure_native
    gateway = {"hostTemplate": "ssh-{instance}.example.test", "publishedRange": PUBLISHED}
    stacks = [
        make_stack(
            stack_config(
                emulator,
                [static_instance(f"s{k}-a"), static_instance(f"s{k}-b")],
                port_range=f"{40000 + 20 * k}-{40019 + 20 * k}",
                firewall=FIREWALL,
                gateway=gateway,
            )
        )
        for k in range(SHARDS)
    ]
    # The worst overlap: every create waits until all ten have come, so every `up` planned against the empty NSG.
    names = [merged_rule_name("ssh-gateway", s.name, "") for s in stacks]
    arrived = [fake_azure.hold_before_create(name) for name in names]
    with ThreadPoolExecutor(max_workers=SHARDS) as pool:
        runs = [pool.submit(stack.up) for stack in stacks]
        try:
            assert all(event.wait(timeout=600) for event in arrived), "not every shard's rule create came"
        finally:
            fake_azure.release()
        failed = [stack.name for stack, run in zip(stacks, runs, strict=True) if run.exception() is not None]
    assert not failed, f"{failed} failed; Azure refused {fake_azure.refused}"
    rules = fake_azure.rules("rg-gw", "nsg-gw")
    priorities = [rules[name]["priority"] for name in names]
    # Shard k's band is the k-th tenth of 1000-4096.
    assert priorities == [1000 + k * 3097 // SHARDS for k in range(SHARDS)]
    assert fake_azure.writes("rg-gw", "nsg-gw").refused == 0


def test_two_stacks_without_a_shared_published_range_race_and_the_losers_next_up_takes_another(
    azure_native: str, fake_azure: FakeAzure, emulator: EmulatorHandle, make_stack: StackFactory
) -> None:
    assert azure_native
    first = make_stack(stack_config(emulator, [static_instance("a1")], port_range="40000-40009", firewall=FIREWALL))
    second = make_stack(stack_config(emulator, [static_instance("b1")], port_range="40010-40019", firewall=FIREWALL))
    first_rule, second_rule = (merged_rule_name("ssh-gateway", s.name, "") for s in (first, second))
    # The first `up` has read the NSG (empty: it plans 1000) and its create is on its way when the second's reads.
    held = fake_azure.hold_before_create(first_rule)
    outcome: list[BaseException] = []

    def up() -> None:
        try:
            first.up()
        except BaseException as exc:  # looked at below, in the test's thread
            outcome.append(exc)

    runner = threading.Thread(target=up)
    runner.start()
    try:
        assert held.wait(timeout=300), "the first stack's rule create never came"
        second.up()
    finally:
        fake_azure.release()
        runner.join(timeout=300)
    rules = fake_azure.rules("rg-gw", "nsg-gw")
    assert rules[second_rule]["priority"] == 1000 and first_rule not in rules  # nothing of the loser's open
    assert outcome and "SecurityRuleConflict" in str(outcome[0])

    first.up()  # reads the winner's rule: takes the next priority
    rules = fake_azure.rules("rg-gw", "nsg-gw")
    assert (rules[first_rule]["priority"], rules[second_rule]["priority"]) == (1001, 1000)
