"""`ssh-gateway up`'s exit codes as docs/commands.md gives them, through the real command, the real pulumi CLI, the
Pangolin emulator and the Azure stand-in: every refusal at preview is 3 (nothing written), a stack that does not
exist is 2, a failure that may heal by itself is 1, and after Azure's `SecurityRuleConflict` the last line says to
run again, not to recover."""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pulumi import automation as auto

from pangolin_emulator.harness import EmulatorHandle
from ssh_gateway.core.names import merged_rule_name
from ssh_gateway.ops.exit_codes import ExitCode
from ssh_gateway.plumbing.toolchain import REPO

from .cli import run
from .conftest import StackFactory, stack_config, static_instance
from .fake_azure import FakeAzure

pytestmark = pytest.mark.integration

SSH_GATEWAY = str(REPO / ".venv" / "bin" / "ssh-gateway")
RG, NSG = "rg-gw", "nsg-gw"
FIREWALL = {"resourceGroup": RG, "nsgName": NSG, "sourceCidrs": ["203.0.113.0/24"]}
FOREIGN = {
    "priority": 300,
    "direction": "Inbound",
    "access": "Allow",
    "protocol": "Tcp",
    "sourceAddressPrefix": "198.51.100.7",
    "sourcePortRange": "*",
    "destinationAddressPrefix": "*",
    "destinationPortRange": "443",
}


def up(stack: str) -> subprocess.CompletedProcess[str]:
    return run([SSH_GATEWAY, "up", "--stack", stack, "--", "--color=never"])


def writes(emulator: EmulatorHandle) -> list[str]:
    return [route for route, n in emulator.counters().items() if n and not route.startswith("GET ")]


def _misspelt(stack: auto.Stack, _azure: FakeAzure) -> str:
    stack.set_config("ssh-gateway:ports", auto.ConfigValue('{"rnage": "40000-40009"}'))
    return "ssh-gateway:ports.rnage: unknown key; did you mean 'range'?"


def _over_the_addresses(stack: auto.Stack, azure: FakeAzure) -> str:
    many = [f"10.{i // 250}.{i % 250}.0/24" for i in range(3999)]
    azure.seed_rule(RG, NSG, "corp-allow", {**FOREIGN, "sourceAddressPrefix": None, "sourceAddressPrefixes": many})
    wider = {**FIREWALL, "sourceCidrs": ["203.0.113.0/24", "192.0.2.0/24"]}  # 3,999 + 2 over the 4,000
    stack.set_config("ssh-gateway:firewall", auto.ConfigValue(json.dumps(wider)))
    return "over Azure's 4,000"


def _foreign_rule_name(stack: auto.Stack, azure: FakeAzure) -> str:
    azure.seed_rule(RG, NSG, merged_rule_name("ssh-gateway", stack.name, ""), FOREIGN)
    return "is taken by a rule that is not this stack's"


def _missing_nsg(_stack: auto.Stack, azure: FakeAzure) -> str:
    azure.remove_nsg(RG, NSG)
    return 'Code="ResourceNotFound"'


def _exhausted(stack: auto.Stack, _azure: FakeAzure) -> str:
    instances = [static_instance(f"a{i}") for i in range(1, 12)]
    stack.set_config("ssh-gateway:instances", auto.ConfigValue(json.dumps(instances)))
    return "ssh-gateway:ports.range 40000-40009 is exhausted"


REFUSALS: list[Callable[[auto.Stack, FakeAzure], str]] = [
    _misspelt,
    _over_the_addresses,
    _foreign_rule_name,
    _missing_nsg,
    _exhausted,
]


@pytest.mark.parametrize("first", [True, False], ids=["first-up", "later-up"])
@pytest.mark.parametrize("refuse", REFUSALS, ids=[f.__name__.strip("_") for f in REFUSALS])
def test_every_refusal_at_preview_exits_3_and_writes_nothing(
    azure_native: str,
    fake_azure: FakeAzure,
    emulator: EmulatorHandle,
    make_stack: StackFactory,
    refuse: Callable[[auto.Stack, FakeAzure], str],
    first: bool,
) -> None:
    assert azure_native
    instances = [static_instance("a1"), static_instance("a2")]
    stack = make_stack(stack_config(emulator, instances, port_range="40000-40009", firewall=FIREWALL))
    if not first:  # a stack that exists: `pulumi up`'s own preview refuses, not the decision preview
        stack.up()
    expected = refuse(stack, fake_azure)
    emulator.reset_counters()
    rules_before = fake_azure.rules(RG, NSG) if expected != 'Code="ResourceNotFound"' else {}

    done = up(stack.name)

    assert done.returncode == ExitCode.REFUSED, done.stdout[-2000:] + done.stderr[-2000:]
    assert expected in done.stdout + done.stderr, done.stdout[-2000:] + done.stderr[-2000:]
    assert done.stderr.rstrip().endswith(
        f"up {stack.name}: refused, nothing was written: change what the error names, then "
        f"ssh-gateway up --stack {stack.name}"
    ), done.stderr[-1000:]
    assert writes(emulator) == []
    if expected != 'Code="ResourceNotFound"':
        assert fake_azure.rules(RG, NSG) == rules_before


def test_no_such_stack_is_2_and_a_failure_that_may_heal_is_1(
    emulator: EmulatorHandle, make_stack: StackFactory, tmp_path: Path
) -> None:
    assert up("it-no-such-stack").returncode == ExitCode.CANNOT_RUN
    config: dict[str, Any] = stack_config(emulator, [static_instance("a1")])
    config["ssh-gateway:pangolin"] = {**config["ssh-gateway:pangolin"], "url": "http://127.0.0.1:9/v1"}
    stack = make_stack(config)
    done = up(stack.name)  # Pangolin does not answer: a read that failed, not a refusal
    assert done.returncode == ExitCode.FAILED, done.stderr[-2000:]
    assert "cannot list Pangolin org" in done.stdout + done.stderr


def test_after_a_priority_conflict_the_up_exits_1_and_says_to_run_again(
    azure_native: str, fake_azure: FakeAzure, emulator: EmulatorHandle, make_stack: StackFactory
) -> None:
    assert azure_native
    stack = make_stack(stack_config(emulator, [static_instance("a1")], port_range="40000-40009", firewall=FIREWALL))
    rule = merged_rule_name("ssh-gateway", stack.name, "")
    held = fake_azure.hold_before_create(rule)
    result: list[subprocess.CompletedProcess[str]] = []
    runner = threading.Thread(target=lambda: result.append(up(stack.name)))
    runner.start()
    try:
        assert held.wait(timeout=300), "the stack's rule create never came"
        # Another stack's rules land at every priority this run could have picked, after its read of the NSG.
        for priority in range(1000, 1100):
            fake_azure.seed_rule(RG, NSG, f"other-{priority}", {**FOREIGN, "priority": priority})
    finally:
        fake_azure.release()
        runner.join(timeout=300)
    [done] = result
    assert done.returncode == ExitCode.FAILED, done.stderr[-2000:]
    last = done.stderr.rstrip().splitlines()[-1]
    assert "SecurityRuleConflict" in last and "picks a free priority" in last and "recover" not in last, last
    assert rule not in fake_azure.rules(RG, NSG)
