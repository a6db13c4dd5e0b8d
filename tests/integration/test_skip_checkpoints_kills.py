"""kill -9 of a large first `ssh-gateway up` at 3 points, then `ssh-gateway recover` and `ssh-gateway up` (issue 19).

A first `up` skips its checkpoints (ssh_gateway/ops/up.py), which is safe only if a killed one is healed by
`recover` and the next `up`: the Pangolin resources adopted by name by their provider, the NSG rules imported by
`recover` (ssh_gateway/ops/adopt.py). Each trial is a fresh stack of 300 static instances with an NSG rule each
in the Azure stand-in (fake_azure.py), through the real CLI and the emulator; the procedure is
skip_checkpoints_kill.py, which the benchmark's kill row runs too.

Static targets only: no Kubernetes Service or Secret is among the creates here. Their adoption after a lost
first `up` is test_recover_import.py's, against the real kube-apiserver.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from pulumi import automation as auto

from pangolin_emulator.harness import EmulatorHandle
from ssh_gateway.ops.automation import open_stack, stack_file

from .conftest import stack_config, static_instance
from .fake_azure import FakeAzure
from .reliability import show
from .skip_checkpoints_kill import FIREWALL_CONFIG, KILL_POINTS, kill_first_up

pytestmark = pytest.mark.integration

FLEET = [f"k{n:03d}" for n in range(300)]


@pytest.fixture
def fresh_stack(emulator: EmulatorHandle, azure_native: str) -> Iterator[auto.Stack]:
    """A new stack of `FLEET` with the firewall on. Removed afterwards without a destroy: its resources live only
    in this test's emulator and stand-in, and destroying 300 instances costs about as long as making them."""
    del azure_native  # asked for so the stand-in serves every command of the stack
    ports = f"20000-{20000 + 2 * len(FLEET) - 1}"
    config = stack_config(emulator, [static_instance(name) for name in FLEET], port_range=ports) | FIREWALL_CONFIG
    stack = open_stack(f"kill-{uuid.uuid4().hex[:8]}", config, secrets={"pangolin:apiKey": emulator.api_key})
    yield stack
    stack.workspace.remove_stack(stack.name, force=True)
    stack_file(stack.name, Path(stack.workspace.work_dir)).unlink(missing_ok=True)


@pytest.mark.parametrize("share", KILL_POINTS, ids=lambda share: f"at-{share:.0%}")
def test_kill_9_of_a_first_up_then_recover_then_up_leaves_nothing_behind(
    share: float,
    emulator: EmulatorHandle,
    fake_azure: FakeAzure,
    fresh_stack: auto.Stack,
    tmp_path: Path,
    pytestconfig: pytest.Config,
) -> None:
    trial = kill_first_up(emulator, fake_azure, fresh_stack, FLEET, share, tmp_path)

    show(pytestconfig, trial.summary())
    assert trial.said_skipping, trial.logs["first up"]
    assert not trial.held_at_kill, "the killed first up wrote a checkpoint: it did not skip them"
    assert trial.recover_exit == 0, trial.logs["recover"]
    assert trial.up_exit == 0, trial.logs["up"]
    assert trial.moved == [], "instances whose port the recovery moved"
    assert trial.pangolin.clean, trial.pangolin
    assert trial.rules.clean, trial.rules
    assert trial.preview_clean, trial.logs["preview"]
