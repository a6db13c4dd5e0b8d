"""Two shards racing on one NSG priority (issue 30): the program never gives two stacks one priority, so only two
`up`s that read the NSG at the same instant can meet on one. Azure refuses the second write; that `up` fails
before its rule exists, and its next `up` reads the winner's rule and takes another priority. The real CLI, the
Azure stand-in (fake_azure.py), which refuses two inbound rules at one priority as Azure does."""

from __future__ import annotations

import threading

import pytest

from pangolin_emulator.harness import EmulatorHandle
from ssh_gateway.core.names import merged_rule_name

from .conftest import StackFactory, stack_config, static_instance
from .fake_azure import FakeAzure

pytestmark = pytest.mark.integration

FIREWALL = {"resourceGroup": "rg-gw", "nsgName": "nsg-gw", "sourceCidrs": ["203.0.113.0/24"]}  # default priorityBase


def test_the_loser_of_a_race_on_one_priority_fails_and_its_next_up_takes_another(
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
