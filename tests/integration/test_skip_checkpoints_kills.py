"""kill -9 of a large first `up` run with `PULUMI_SKIP_CHECKPOINTS=true` (issue 19, item 1).

Without intermediate checkpoints a killed run leaves no pending operation at all: its Services (the real
kube-apiserver), NSG rules (the Azure stand-in, which refuses to create what exists) and Pangolin resources
exist, and no state knows them. `recover` imports the Services and rules that carry this stack's mark; the
next `up` adopts the Pangolin resources by name and takes their ports back into the table. One sequence of
300 instances: kill at ~15 % of the objects, recover, `up` again killed at ~50 %, recover, again at ~85 %,
recover, and a last `up` that finishes. Every kill ends with the same checks: no orphan (an object the state
does not hold), no twin, no pending operation, no port bound twice, every port where it was, a clean preview.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from pulumi import automation as auto

from pangolin_emulator.harness import EmulatorHandle
from ssh_gateway.core.names import owner_prefix
from ssh_gateway.local.control_plane import ControlPlane

from .adoption import adoptable_config, leftovers
from .conftest import StackFactory
from .fake_azure import FakeAzure
from .reliability import kill_tree, recover, show, start_up, wait_until

pytestmark = pytest.mark.integration

COUNT = 300
INSTANCES = [f"g{n:03d}" for n in range(COUNT)]
KILL_AT = (0.15, 0.50, 0.85)


def _objects(kube: ControlPlane, namespace: str, azure: FakeAzure) -> int:
    """Services in the namespace plus NSG rules in the stand-in: the run's adoptable creates so far."""
    with kube.client() as api:
        services = api.get(f"/api/v1/namespaces/{namespace}/services").raise_for_status().json()["items"]
    with azure.lock:
        return len(services) + len(azure.objects)


def _ports(emulator: EmulatorHandle, stack: auto.Stack) -> dict[str, int]:
    """Instance -> the port its Pangolin resource binds (the lowest id where there are twins)."""
    prefix = owner_prefix(stack.workspace.project_settings().name, stack.name)
    found: dict[str, tuple[int, int]] = {}
    for r in emulator.state()["resources"]:
        name = str(r["name"])
        if name.startswith(prefix):
            instance = name.removeprefix(prefix)
            if instance not in found or int(r["resourceId"]) < found[instance][0]:
                found[instance] = (int(r["resourceId"]), int(r["proxyPort"]))
    return {instance: port for instance, (_, port) in found.items()}


def test_kill_9_at_three_points_of_a_first_up_of_300_without_checkpoints(
    azure_native: str,
    fake_azure: FakeAzure,
    emulator: EmulatorHandle,
    make_stack: StackFactory,
    kube: ControlPlane,
    kube_namespace: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    pytestconfig: pytest.Config,
) -> None:
    started = time.monotonic()
    # Upsert off (see test_recover_adopt.py): a create of an existing Service fails, as with the real providers.
    monkeypatch.setenv("PULUMI_K8S_ENABLE_SERVER_SIDE_APPLY", "false")
    monkeypatch.setenv("PULUMI_SKIP_CHECKPOINTS", "true")
    config = adoptable_config(
        emulator, INSTANCES, kubeconfig=kube.kubeconfig, namespace=kube_namespace, port_range="41000-41399"
    )
    config["ssh-gateway:hostIdentity"] = {"enabled": False}  # Services and NSG rules: what the kills are about
    stack = make_stack(config)
    total = 2 * COUNT
    lines: list[str] = []
    seen_ports: dict[str, int] = {}
    for n, share in enumerate(KILL_AT, 1):
        up = start_up(stack, tmp_path / f"up-{n}.log")
        wait_until(
            lambda share=share: _objects(kube, kube_namespace, fake_azure) >= share * total,  # type: ignore[misc]
            f"{share:.0%} of the objects",
            process=up,
            timeout=900,
        )
        made = _objects(kube, kube_namespace, fake_azure)
        kill_tree(up)
        before = _ports(emulator, stack)
        recovered = recover(stack, "--json")
        assert recovered.returncode == 0, recovered.stdout + recovered.stderr
        report = json.loads(recovered.stdout)
        assert not report["pending"], report["pending"]  # no checkpoint was written: nothing pending
        adopted = [a for a in report["adopted"] if a["outcome"] == "adopted"]
        assert adopted, report["done"]
        left = leftovers(stack, emulator, kube, kube_namespace, fake_azure)
        assert (left.kubernetes, left.rules, left.pending) == ([], [], 0), left
        for instance, port in before.items():  # a port once bound never moves
            assert seen_ports.setdefault(instance, port) == port, (instance, seen_ports[instance], port)
        lines.append(f"kill {n} at {made}/{total} objects: recover imported {len(adopted)}")

    monkeypatch.delenv("PULUMI_SKIP_CHECKPOINTS")
    result = stack.up(color="never")
    assert "already exist" not in result.stdout
    assert not fake_azure.refused, fake_azure.refused[:3]
    left = leftovers(stack, emulator, kube, kube_namespace, fake_azure)
    assert left.clean, left
    final = _ports(emulator, stack)
    assert sorted(final) == sorted(INSTANCES)
    moved = {i: (p, final[i]) for i, p in seen_ports.items() if final[i] != p}
    assert not moved, moved
    table = stack.outputs()["allocations"].value
    assert table == final and len(set(table.values())) == COUNT
    stack.preview(expect_no_changes=True)
    show(
        pytestconfig,
        f"first up of {COUNT} without checkpoints, killed 3 times: "
        + "; ".join(lines)
        + f"; last up: orphans 0, twins 0, pending 0, ports bound twice 0, ports moved 0; "
        f"{time.monotonic() - started:.0f}s in all",
    )
