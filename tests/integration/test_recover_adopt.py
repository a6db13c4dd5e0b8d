"""kill -9 of `up` right after a create, with providers that refuse to create what exists (issue 23, item 1).

The real kube-apiserver (through `kube_hold`'s relay) and the Azure stand-in, which keeps its objects across the
test's `pulumi` runs and refuses a create of an existing rule with azure-native's own message. Kubernetes with
upsert off: pulumi-kubernetes 4.25 (the pin) upserts only under server-side apply, so
`PULUMI_K8S_ENABLE_SERVER_SIDE_APPLY=false` makes its create a plain POST that the API server refuses with
`AlreadyExists`, as v4.29+ does without `upsertExistingObjects`; the Service case also runs with it on.

Each kill lands while the provider's create of one object is held after the object exists, so the state holds
that create as pending. Each test ends with `recover`, then `up`, then: no pending operation, nothing that
exists without the state holding it, no "already exists", a clean preview.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pulumi import automation as auto

from pangolin_emulator.harness import EmulatorHandle
from ssh_gateway.core.names import STACK_MARK, stack_mark
from ssh_gateway.local.control_plane import ControlPlane

from .adoption import adoptable_config, leftovers, pending_urns
from .conftest import StackFactory
from .fake_azure import FakeAzure
from .kube_hold import HoldingRelay, holding_relay
from .reliability import kill_tree, recover, show, start_up, wait_until

pytestmark = pytest.mark.integration

INSTANCES = ["a", "b"]


@pytest.fixture
def relay(kube: ControlPlane) -> object:
    with holding_relay(kube) as running:
        yield running


def _stack(
    emulator: EmulatorHandle, make_stack: StackFactory, relay: HoldingRelay, namespace: str, tmp_path: Path
) -> auto.Stack:
    kubeconfig = relay.kubeconfig(tmp_path / "kubeconfig")
    return make_stack(
        adoptable_config(emulator, INSTANCES, kubeconfig=kubeconfig, namespace=namespace, port_range="40000-40009")
    )


def _kill_recover_up(
    stack: auto.Stack,
    held: object,
    release: object,
    urn_suffix: str,
    *,
    emulator: EmulatorHandle,
    kube: ControlPlane,
    namespace: str,
    azure: FakeAzure,
    tmp_path: Path,
) -> str:
    up = start_up(stack, tmp_path / "up.log")
    wait_until(held.is_set, f"the held create of {urn_suffix}", process=up, timeout=300)  # type: ignore[attr-defined]
    killed = kill_tree(up)
    release()  # type: ignore[operator]

    # (The state cannot be read before `recover`: a kill during a checkpoint's write leaves a 0-byte .attrs.)
    recovered = recover(stack, "--json")
    assert recovered.returncode == 0, recovered.stdout + recovered.stderr
    report = json.loads(recovered.stdout)
    pending = [p["urn"] for p in report["pending"]]
    outcomes = {p["urn"].rsplit("::", 1)[-1]: p["outcome"] for p in report["pending"]}
    assert outcomes.get(urn_suffix.removeprefix("::")) == "adopted", report
    assert not pending_urns(stack)

    result = stack.up(color="never")
    assert "already exist" not in result.stdout, result.stdout
    assert not azure.refused, azure.refused
    left = leftovers(stack, emulator, kube, namespace, azure)
    assert left.clean, left
    stack.preview(expect_no_changes=True)
    return f"{killed} processes killed, {len(pending)} pending; recover adopted {urn_suffix}; then up: {left}"


@pytest.mark.parametrize("server_side_apply", ["false", "true"], ids=["upsert-off", "upsert-on"])
def test_kill_9_right_after_a_service_create(
    server_side_apply: str,
    azure_native: str,
    fake_azure: FakeAzure,
    emulator: EmulatorHandle,
    make_stack: StackFactory,
    kube: ControlPlane,
    kube_namespace: str,
    relay: HoldingRelay,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    pytestconfig: pytest.Config,
) -> None:
    monkeypatch.setenv("PULUMI_K8S_ENABLE_SERVER_SIDE_APPLY", server_side_apply)
    stack = _stack(emulator, make_stack, relay, kube_namespace, tmp_path)
    held = relay.hold("services", "ssh-a")
    line = _kill_recover_up(
        stack, held, relay.release, "::a-service",
        emulator=emulator, kube=kube, namespace=kube_namespace, azure=fake_azure, tmp_path=tmp_path,
    )  # fmt: skip
    show(pytestconfig, f"kill -9 right after a Service create (server-side apply {server_side_apply}): {line}")


def test_kill_9_right_after_a_secret_create(
    azure_native: str,
    fake_azure: FakeAzure,
    emulator: EmulatorHandle,
    make_stack: StackFactory,
    kube: ControlPlane,
    kube_namespace: str,
    relay: HoldingRelay,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    pytestconfig: pytest.Config,
) -> None:
    monkeypatch.setenv("PULUMI_K8S_ENABLE_SERVER_SIDE_APPLY", "false")
    stack = _stack(emulator, make_stack, relay, kube_namespace, tmp_path)
    held = relay.hold("secrets", "ssh-a-host-key")
    line = _kill_recover_up(
        stack, held, relay.release, "::a-host-key-secret",
        emulator=emulator, kube=kube, namespace=kube_namespace, azure=fake_azure, tmp_path=tmp_path,
    )  # fmt: skip
    show(pytestconfig, f"kill -9 right after a Secret create: {line}")


def test_kill_9_right_after_an_nsg_rule_create(
    azure_native: str,
    fake_azure: FakeAzure,
    emulator: EmulatorHandle,
    make_stack: StackFactory,
    kube: ControlPlane,
    kube_namespace: str,
    relay: HoldingRelay,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    pytestconfig: pytest.Config,
) -> None:
    monkeypatch.setenv("PULUMI_K8S_ENABLE_SERVER_SIDE_APPLY", "false")
    stack = _stack(emulator, make_stack, relay, kube_namespace, tmp_path)
    held = fake_azure.hold_after_create("ssh-gateway-a")
    line = _kill_recover_up(
        stack, held, fake_azure.release, "::a-nsg-rule",
        emulator=emulator, kube=kube, namespace=kube_namespace, azure=fake_azure, tmp_path=tmp_path,
    )  # fmt: skip
    show(pytestconfig, f"kill -9 right after an NSG rule create: {line}")


def test_objects_no_state_holds_are_refused_by_up_and_adopted_by_recover_only_with_this_stacks_mark(
    azure_native: str,
    fake_azure: FakeAzure,
    emulator: EmulatorHandle,
    make_stack: StackFactory,
    kube: ControlPlane,
    kube_namespace: str,
    relay: HoldingRelay,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # What a killed first `up` with PULUMI_SKIP_CHECKPOINTS leaves: objects, and no state that knows them.
    monkeypatch.setenv("PULUMI_K8S_ENABLE_SERVER_SIDE_APPLY", "false")
    stack = _stack(emulator, make_stack, relay, kube_namespace, tmp_path)
    mark = stack_mark(stack.workspace.project_settings().name, stack.name)

    def service(name: str, annotations: dict[str, str]) -> dict[str, object]:
        return {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": name, "annotations": annotations},
            "spec": {"ports": [{"port": 22, "targetPort": 22, "protocol": "TCP", "name": "ssh"}]},
        }

    with kube.client() as api:
        for name, annotations in (("ssh-a", {STACK_MARK: mark}), ("ssh-b", {STACK_MARK: "ssh-gateway/someone"})):
            api.post(
                f"/api/v1/namespaces/{kube_namespace}/services", json=service(name, annotations)
            ).raise_for_status()

    # The provider refuses to create what exists: the setting under test does not upsert.
    with pytest.raises(auto.CommandError, match="already exists"):
        stack.up(color="never")

    refused = recover(stack, "--json")
    assert refused.returncode == 1, refused.stdout + refused.stderr
    report = json.loads(refused.stdout)
    assert {(a["objectId"], a["outcome"]) for a in report["adopted"]} >= {
        (f"{kube_namespace}/ssh-a", "adopted"),
        (f"{kube_namespace}/ssh-b", "foreign"),
    }, report
    assert any("someone else's" in line and "ssh-b" in line for line in report["done"]), report

    with kube.client() as api:  # its owner takes it away
        api.delete(f"/api/v1/namespaces/{kube_namespace}/services/ssh-b").raise_for_status()
    again = recover(stack)
    assert again.returncode == 0, again.stdout + again.stderr
    stack.up(color="never")
    left = leftovers(stack, emulator, kube, kube_namespace, fake_azure)
    assert left.clean, left
    assert not fake_azure.refused, fake_azure.refused
    stack.preview(expect_no_changes=True)
