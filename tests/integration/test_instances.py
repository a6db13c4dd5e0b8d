"""SshInstance stacks through the real CLI: stable allocation across ups, drift seen by refresh, concrete
ports in previews, and no doubly bound port on the Pangolin side."""

from __future__ import annotations

import re
import subprocess

import pytest
from pulumi.automation import OpType

from pangolin_emulator.harness import EmulatorHandle
from ssh_gateway.ops.shared.automation import state_file
from ssh_gateway.plumbing.toolchain import pulumi_env

from .conftest import StackFactory, change_by_hand, exported_resources, stack_config, static_instance

pytestmark = pytest.mark.integration


def ports_on_emulator(emulator: EmulatorHandle) -> dict[str, int]:
    return {r["name"].rsplit("/", 1)[1]: r["proxyPort"] for r in emulator.state()["resources"]}


def test_ports_stay_put_while_instances_come_and_go(emulator: EmulatorHandle, make_stack: StackFactory) -> None:
    rounds = [
        ["a", "c", "e"],
        ["a", "b", "c", "d", "e"],  # added in the middle
        ["a", "d", "e"],  # removed from the middle
        ["a", "b", "d", "e", "f"],  # never-used ports before the freed ones
    ]
    seen: dict[str, int] = {}
    stack = None
    for names in rounds:
        config = stack_config(emulator, [static_instance(n) for n in names], port_range="40000-40009")
        stack = make_stack(config, name=stack.name if stack else None)
        outputs = {k: v.value for k, v in stack.up().outputs.items()}
        allocations = outputs["allocations"]
        assert sorted(allocations) == names
        for name, port in allocations.items():
            assert seen.setdefault(name, port) == port, f"{name} moved"
        assert ports_on_emulator(emulator) == allocations
        assert emulator.doubly_bound_ports() == {}
        stack.preview(expect_no_changes=True)
        seen = {n: p for n, p in seen.items() if n in names}

    # b and c released 40003 and 40001; the returning b and the new f get never-used ports first.
    assert outputs["allocations"] == {"a": 40000, "b": 40005, "d": 40004, "e": 40002, "f": 40006}
    assert outputs["releasedPorts"] == [40003, 40001]


def test_preview_diff_shows_the_new_instance_port(emulator: EmulatorHandle, make_stack: StackFactory) -> None:
    stack = make_stack(stack_config(emulator, [static_instance("a")]))
    stack.up()
    stack = make_stack(stack_config(emulator, [static_instance("a"), static_instance("b")]), name=stack.name)

    preview = stack.preview(diff=True)
    # b's component and Pangolin resource (its host key is derived: no resource); the allocation's table and the
    # port check after the create; the stack, the CA, the host-key root, and a's two.
    assert preview.change_summary == {"create": 2, "update": 2, "same": 5}
    # The new instance's Pangolin resource is created on its concrete port, not [unknown].
    block = preview.stdout.split("::b-pangolin]", 1)[1].split("--outputs:--", 1)[0]
    assert re.search(r"^\s*proxyPort\s*: 40001$", block, re.M), block
    assert re.search(r"^\s*\+ b: 40001$", preview.stdout, re.M)  # and the allocation table says so


def test_refresh_sees_an_out_of_band_change_and_up_heals_it(emulator: EmulatorHandle, make_stack: StackFactory) -> None:
    stack = make_stack(stack_config(emulator, [static_instance("a"), static_instance("b"), static_instance("c")]))
    stack.up()
    before = ports_on_emulator(emulator)
    change_by_hand(emulator, "b", proxyPort=40015)

    refresh = stack.refresh()
    assert refresh.summary.resource_changes is not None
    assert refresh.summary.resource_changes.get(OpType.UPDATE) == 1
    drift = stack.preview(diff=True)
    # Putting the port back is a replacement: a new claim of the port, as a create makes it.
    assert "40015" in drift.stdout and drift.change_summary.get(OpType.REPLACE) == 1

    stack.up()
    assert ports_on_emulator(emulator) == before
    stack.preview(expect_no_changes=True)
    assert emulator.api_key.split(".")[1] not in state_file(stack).read_text()

    stack.destroy()
    assert emulator.state() == {"resources": [], "targets": []}


def test_a_resource_left_by_an_interrupted_run_is_adopted_not_twinned(
    emulator: EmulatorHandle, make_stack: StackFactory
) -> None:
    stack = make_stack(stack_config(emulator, [static_instance("a"), static_instance("b")]))
    stack.up()
    # What a run killed between Pangolin's answer and Pulumi's checkpoint leaves: the resource exists in
    # Pangolin, the allocation table has its port, but the stack's state does not know the resource.
    urn = next(r["urn"] for r in exported_resources(stack) if r["urn"].endswith("::b-pangolin"))
    subprocess.run(
        # The port check depends on every Pangolin resource: it goes too, and the next run makes it again.
        ["pulumi", "state", "delete", urn, "--stack", stack.name, "--yes", "--force", "--target-dependents"],
        cwd=stack.workspace.work_dir,
        env=pulumi_env(),
        check=True,
        capture_output=True,
    )
    leftover = next(r for r in emulator.state()["resources"] if r["name"].endswith("/b"))
    emulator.reset_counters()

    up = stack.up()

    assert "adopted existing resource" in up.stdout + up.stderr
    assert emulator.counters().get("PUT /v1/org/{orgId}/resource", 0) == 0
    [adopted] = [r for r in emulator.state()["resources"] if r["name"].endswith("/b")]
    assert adopted["resourceId"] == leftover["resourceId"]
    assert emulator.doubly_bound_ports() == {}
    stack.preview(expect_no_changes=True)
