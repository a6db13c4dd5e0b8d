"""scripts/drift-check against a stack whose Pangolin resource was changed by hand on the emulator."""

from __future__ import annotations

import pytest

from pangolin_emulator.harness import EmulatorHandle
from ssh_gateway.plumbing.toolchain import REPO

from .cli import run
from .conftest import StackFactory, change_by_hand, stack_config, static_instance

pytestmark = pytest.mark.integration

DRIFT_CHECK = str(REPO / "scripts" / "drift-check")


def test_a_port_changed_by_hand_fails_the_check_naming_the_resource(
    emulator: EmulatorHandle, make_stack: StackFactory
) -> None:
    stack = make_stack(stack_config(emulator, [static_instance("a"), static_instance("b")]))
    stack.up()
    clean = run([DRIFT_CHECK, stack.name])
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert clean.stdout.strip() == (
        f"No drift in stack {stack.name}: Pangolin, Kubernetes and the NSG match the program."
    )

    change_by_hand(emulator, "b", proxyPort=40015)

    drifted = run([DRIFT_CHECK, stack.name])
    assert drifted.returncode == 1, drifted.stdout + drifted.stderr
    lines = drifted.stdout.splitlines()
    assert lines[0] == (
        f"Drift in stack {stack.name}: 1 resource(s) differ from what the program declares (live → declared):"
    )
    assert lines[1] == (
        "  - b-pangolin (pulumi-python:dynamic/pangolin:TcpResource, instance b): changed outside Pulumi (putting it "
        "back replaces it)"
    )
    assert lines[2] == "      proxyPort: 40015 → 40001"
    assert f"pulumi up --refresh --stack {stack.name}" in lines[3]

    # What it advises puts it back.
    stack.up(refresh=True)
    healed = run([DRIFT_CHECK, stack.name])
    assert healed.returncode == 0, healed.stdout + healed.stderr


def test_a_preview_that_fails_is_not_reported_as_drift() -> None:
    failed = run([DRIFT_CHECK, "no-such-stack"])
    assert failed.returncode == 2, failed.stdout + failed.stderr
    assert failed.stdout.startswith("drift-check: the preview of stack no-such-stack failed (exit ")
    assert "no-such-stack" in failed.stdout.splitlines()[1]
