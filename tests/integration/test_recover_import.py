"""Issue 23, item 1: a kill -9 of `pulumi up` right after the create of a Service, of a host-key Secret and of
an NSG rule - the object exists, the engine has the create pending - and of a first `up` without checkpoints
right after a Service create (nothing in the state at all), and of the merged NSG rule's create and of its
update for a +1 (`firewall.rules: merged`); then `ssh-gateway recover` and `ssh-gateway up`
leave 0 pending operations, 0 orphans, no "already exists" and a clean preview.

The providers here refuse to create what exists, as the real ones do: pulumi-kubernetes 4.25 with
`PULUMI_K8S_ENABLE_SERVER_SIDE_APPLY=false` creates by POST, which the API server answers `AlreadyExists` for an
object that exists (as v4.29+ does without `upsertExistingObjects`; under server-side apply, 4.25's default,
a create is an apply patch: an upsert, which would hide the hazard), and the Azure stand-in (fake_azure.py)
refuses as azure-native's `CanCreate` does; the test without checkpoints runs under server-side apply too, the
pinned provider's default. The Service test shows the hazard is real: with the pending create
only cleared, the next `up` fails with the API server's `AlreadyExists`. "Right after" is a held answer, not a
race: the create's answer is withheld (provider_hold.py, fake_azure.py's `hold_after_create`) until `pulumi up`
is killed.
"""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pulumi import automation as auto

from pangolin_emulator.harness import EmulatorHandle
from ssh_gateway.core.firewall import ports_of
from ssh_gateway.core.names import (
    NSG_RULE_TYPE,
    SECRET_TYPE,
    SERVICE_TYPE,
    STATUS_RESOURCE_NAME,
    STATUS_TYPE,
    merged_rule_name,
    status_config_map_name,
)
from ssh_gateway.local.control_plane import ControlPlane
from ssh_gateway.ops.recovery.adopt import skip_checkpoints_is_recoverable
from ssh_gateway.ops.recovery.state_backend import stack_state
from ssh_gateway.ops.tools.pulumi_up import SKIP_CHECKPOINTS, planned_create_types
from ssh_gateway.plumbing.toolchain import REPO, pulumi_env

from .cli import run
from .conftest import StackFactory, stack_config, static_instance
from .fake_azure import SUBSCRIPTION, FakeAzure, rule_id
from .provider_hold import ProviderHold, plugin_binary, provider_hold
from .reliability import audit, kill_tree, recover, show, start_up, wait_until
from .test_cluster_instances import config as discovery_config
from .test_cluster_instances import create, platform_service

pytestmark = pytest.mark.integration

SERVER_SIDE_APPLY = "PULUMI_K8S_ENABLE_SERVER_SIDE_APPLY"
"""pulumi-kubernetes 4.25's switch: "false" creates by POST, so an existing object is refused with
`AlreadyExists`; "true" (its default, the product's) creates by an apply patch, an upsert."""
REFUSALS = ("already exists", "alreadyexists", "already existing")


@pytest.fixture
def server_side_apply(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Every pulumi of the test (and the plugins it starts) with server-side apply off - no upsert - unless the
    test is parametrized with True. Before `make_stack`: a stack's workspace takes the environment when made."""
    enabled = bool(getattr(request, "param", False))
    monkeypatch.setenv(SERVER_SIDE_APPLY, str(enabled).lower())
    return enabled


@pytest.fixture
def kubernetes_hold(server_side_apply: bool, tmp_path: Path) -> Iterator[ProviderHold]:
    env = pulumi_env()
    binary = plugin_binary(Path(env["PULUMI_HOME"]) / "plugins", "kubernetes")
    with provider_hold(binary, "kubernetes", env, tmp_path / "kubernetes-plugin.log") as hold:
        yield hold


def _kube(kube: ControlPlane, namespace: str) -> dict[str, Any]:
    return {"namespace": namespace, "kubeconfig": str(kube.kubeconfig), "nodeIp": "127.0.0.1"}


def _names(kube: ControlPlane, namespace: str, kind: str) -> list[str]:
    with kube.client() as api:
        items = api.get(f"/api/v1/namespaces/{namespace}/{kind}").raise_for_status().json()["items"]
    return sorted(item["metadata"]["name"] for item in items)


def _uids(kube: ControlPlane, namespace: str, kind: str) -> dict[str, str]:
    """Each object's name -> its uid, which a replacement (delete, then create) changes."""
    with kube.client() as api:
        items = api.get(f"/api/v1/namespaces/{namespace}/{kind}").raise_for_status().json()["items"]
    return {item["metadata"]["name"]: item["metadata"]["uid"] for item in items}


def _held_names(stack: auto.Stack, type_: str) -> list[str]:
    """The object names of the stack's state entries of `type_` (a Kubernetes kind's, or an NSG rule's)."""
    found = []
    for resource in (stack.export_stack().deployment or {}).get("resources") or []:
        if resource["type"] == type_:
            outputs = resource.get("outputs") or {}
            found.append(str((outputs.get("metadata") or {}).get("name") or outputs.get("name")))
    return sorted(found)


def _pending(stack: auto.Stack) -> list[str]:
    deployment = stack.export_stack().deployment or {}
    return [str(op["resource"]["urn"]) for op in deployment.get("pending_operations") or []]


def _pending_after_kill(stack: auto.Stack) -> list[str] | None:
    """The pending operations' resource names right after a kill, or None when the kill landed in a checkpoint
    write of another step begun beside the held one and left fileblob's `.attrs` empty (`failed to load
    checkpoint: EOF`): a state no command can read until `recover` repairs it, which the test then relies on."""
    try:
        return [urn.rsplit("::", 1)[1] for urn in _pending(stack)]
    except auto.CommandError as exc:
        if "failed to load checkpoint" not in str(exc):
            raise
        return None


def _kill_at_hold(stack: auto.Stack, held: threading.Event, log: Path, env: dict[str, str]) -> None:
    """`pulumi up` until the held create's answer is withheld, then kill -9 of its whole process tree."""
    up = start_up(stack, log, env=env)
    try:
        wait_until(held.is_set, "the held create", process=up, timeout=300)
    finally:
        kill_tree(up)


def _ssh_gateway_up(stack: auto.Stack) -> subprocess.CompletedProcess[str]:
    python = str(REPO / ".venv" / "bin" / "python")
    return run([python, "-m", "ssh_gateway.ops", "up", "--stack", stack.name, "--", "--skip-preview", "--color=never"])


def _recover_then_up(stack: auto.Stack) -> tuple[dict[str, Any], str]:
    """`ssh-gateway recover --json`, then `ssh-gateway up`; both must succeed. Their report and their text."""
    recovered = recover(stack, "--json")
    assert recovered.returncode == 0, recovered.stdout + recovered.stderr
    upped = _ssh_gateway_up(stack)
    assert upped.returncode == 0, upped.stdout[-3000:] + upped.stderr[-3000:]
    text = recovered.stdout + recovered.stderr + upped.stdout + upped.stderr
    return json.loads(recovered.stdout), text


def _refusals(text: str) -> list[str]:
    return [line.strip()[:200] for line in text.splitlines() if any(r in line.lower() for r in REFUSALS)]


def _adopted(report: dict[str, Any], type_: str) -> list[str]:
    return sorted(a["objectId"] for a in report["adopted"] if a["type"] == type_ and a["outcome"] == "adopted")


# --- Kubernetes: a Service, a host-key Secret ---------------------------------------------------------------------


def test_a_kill_right_after_a_service_create_is_healed_by_recover_and_up(
    kube: ControlPlane,
    kube_namespace: str,
    kubernetes_hold: ProviderHold,
    emulator: EmulatorHandle,
    make_stack: StackFactory,
    tmp_path: Path,
    pytestconfig: pytest.Config,
) -> None:
    ns = kube_namespace
    # A nodePort instance: its Pangolin resource waits for the Service's assigned port, so the held create is
    # the only one begun. No host identity: no Secret beside it.
    instances = [{"name": "gpu-a", "target": "nodePort"}]
    config = stack_config(emulator, instances, kubernetes=_kube(kube, ns), hostIdentity={"enabled": False})
    stack = make_stack(config)
    held = kubernetes_hold.hold_after_create("gpu-a-service")

    _kill_at_hold(stack, held, tmp_path / "up.log", {"PULUMI_DEBUG_PROVIDERS": kubernetes_hold.debug})

    assert _names(kube, ns, "services") == ["ssh-gpu-a"]  # the API server made it
    assert [urn.rsplit("::", 1)[1] for urn in _pending(stack)] == ["gpu-a-service"]  # the engine never knew

    # The hazard: what clearing the pending create (recover before issue 23) leaves is a stack that up cannot
    # update, since the provider refuses to create what exists.
    _clear_lock_and_pending(stack)
    refused = run(["pulumi", "up", "--yes", "--skip-preview", "--non-interactive", "--stack", stack.name])
    assert refused.returncode != 0
    assert 'services "ssh-gpu-a" already exists' in refused.stdout + refused.stderr, refused.stdout[-2000:]

    report, text = _recover_then_up(stack)

    assert _adopted(report, SERVICE_TYPE) == [f"{ns}/ssh-gpu-a"], report
    result = audit(emulator, stack, ["gpu-a"])
    show(
        pytestconfig,
        f"kill after the Service create: recover adopted {_adopted(report, SERVICE_TYPE)}; then up: "
        f"pending {result.pending}, orphans {len(result.orphans)}, refusals {len(_refusals(text))}",
    )
    assert _refusals(text) == []
    assert result.clean, result
    assert _held_names(stack, SERVICE_TYPE) == _names(kube, ns, "services") == ["ssh-gpu-a"]
    stack.preview(expect_no_changes=True)


def test_a_kill_right_after_a_host_key_secret_create_is_healed_by_recover_and_up(
    kube: ControlPlane,
    kube_namespace: str,
    kubernetes_hold: ProviderHold,
    emulator: EmulatorHandle,
    make_stack: StackFactory,
    tmp_path: Path,
    pytestconfig: pytest.Config,
) -> None:
    ns = kube_namespace
    instances = [{"name": "gpu-b", "target": "clusterIp"}]  # host identity on (the default): a Secret
    stack = make_stack(stack_config(emulator, instances, kubernetes=_kube(kube, ns)))
    held = kubernetes_hold.hold_after_create("gpu-b-host-key-secret")

    _kill_at_hold(stack, held, tmp_path / "up.log", {"PULUMI_DEBUG_PROVIDERS": kubernetes_hold.debug})

    assert "ssh-gpu-b-host-key" in _names(kube, ns, "secrets")
    assert "gpu-b-host-key-secret" in [urn.rsplit("::", 1)[1] for urn in _pending(stack)]

    report, text = _recover_then_up(stack)

    assert f"{ns}/ssh-gpu-b-host-key" in _adopted(report, SECRET_TYPE), report
    result = audit(emulator, stack, ["gpu-b"])
    adopted = _adopted(report, SECRET_TYPE) + _adopted(report, SERVICE_TYPE)
    show(
        pytestconfig,
        f"kill after the Secret create: recover adopted {adopted}"
        f"; then up: pending {result.pending}, orphans {len(result.orphans)}, refusals {len(_refusals(text))}",
    )
    assert _refusals(text) == []
    assert result.clean, result
    assert _held_names(stack, SECRET_TYPE) == _names(kube, ns, "secrets") == ["ssh-gpu-b-host-key"]
    assert _held_names(stack, SERVICE_TYPE) == _names(kube, ns, "services") == ["ssh-gpu-b"]
    stack.preview(expect_no_changes=True)


# Also with server-side apply, the pinned provider's default: what recover imports, its apply then updates.
@pytest.mark.parametrize("server_side_apply", [False, True], ids=["no-upsert", "server-side-apply"], indirect=True)
def test_a_kill_of_a_first_up_without_checkpoints_right_after_a_service_create_is_healed_by_recover_and_up(
    server_side_apply: bool,
    kube: ControlPlane,
    kube_namespace: str,
    kubernetes_hold: ProviderHold,
    emulator: EmulatorHandle,
    make_stack: StackFactory,
    tmp_path: Path,
    pytestconfig: pytest.Config,
) -> None:
    ns = kube_namespace
    # A first up as `ssh-gateway up` runs it (SKIP_CHECKPOINTS): killed, it leaves a state without any record of
    # the Service it made, nor of its Secret (host identity is on) or of the provider and the components.
    stack = make_stack(stack_config(emulator, [{"name": "gpu-c", "target": "nodePort"}], kubernetes=_kube(kube, ns)))
    held = kubernetes_hold.hold_after_create("gpu-c-service")

    _kill_at_hold(
        stack, held, tmp_path / "up.log", {"PULUMI_DEBUG_PROVIDERS": kubernetes_hold.debug, **SKIP_CHECKPOINTS}
    )

    assert _names(kube, ns, "services") == ["ssh-gpu-c"]
    assert _held_names(stack, SERVICE_TYPE) == [] and _pending(stack) == []
    made = _uids(kube, ns, "services") | _uids(kube, ns, "secrets")

    report, text = _recover_then_up(stack)

    adopted = _adopted(report, SERVICE_TYPE) + _adopted(report, SECRET_TYPE)
    assert f"{ns}/ssh-gpu-c" in adopted, report
    result = audit(emulator, stack, ["gpu-c"])
    show(
        pytestconfig,
        f"kill of a first up without checkpoints after the Service create (server-side apply {server_side_apply}):"
        f" recover adopted {adopted}; then up: "
        f"pending {result.pending}, orphans {len(result.orphans)}, refusals {len(_refusals(text))}",
    )
    assert _refusals(text) == []
    assert result.clean, result
    assert _held_names(stack, SERVICE_TYPE) == _names(kube, ns, "services") == ["ssh-gpu-c"]
    assert _held_names(stack, SECRET_TYPE) == _names(kube, ns, "secrets") == ["ssh-gpu-c-host-key"]
    # Adopted and updated, never replaced: the Service keeps its NodePort (the Pangolin target), the Secret never
    # leaves its pod without a key.
    assert _uids(kube, ns, "services") | _uids(kube, ns, "secrets") == made
    stack.preview(expect_no_changes=True)


def test_a_kill_of_a_discovery_stacks_first_up_after_its_status_create_is_healed_by_recover_and_up(
    server_side_apply: bool,
    kube: ControlPlane,
    kube_namespace: str,
    kubernetes_hold: ProviderHold,
    emulator: EmulatorHandle,
    make_stack: StackFactory,
    tmp_path: Path,
    pytestconfig: pytest.Config,
) -> None:
    ns = kube_namespace
    create(kube, ns, "services", platform_service("gpu-d", 30241))
    stack = make_stack(discovery_config(emulator, kube, ns))
    # `ssh-gateway up` skips checkpoints on a first up whose every create recover can adopt: with discovery that
    # includes the status ConfigMap, the last object the run makes (it depends on every instance).
    assert skip_checkpoints_is_recoverable(
        planned_create_types(stack.name, REPO, pulumi_env()), stack_has_resources=False
    )
    held = kubernetes_hold.hold_after_create(STATUS_RESOURCE_NAME)

    _kill_at_hold(
        stack, held, tmp_path / "up.log", {"PULUMI_DEBUG_PROVIDERS": kubernetes_hold.debug, **SKIP_CHECKPOINTS}
    )

    status = status_config_map_name(stack.name)
    assert status in _names(kube, ns, "configmaps")
    assert _held_names(stack, STATUS_TYPE) == [] and _pending(stack) == []

    report, text = _recover_then_up(stack)

    adopted = _adopted(report, STATUS_TYPE) + _adopted(report, SECRET_TYPE)
    assert f"{ns}/{status}" in adopted and f"{ns}/ssh-gpu-d-host-key" in adopted, report
    result = audit(emulator, stack, ["gpu-d"])
    show(
        pytestconfig,
        f"kill of a discovery stack's first up without checkpoints after its status create (server-side apply "
        f"{server_side_apply}): recover adopted {adopted}; then up: pending {result.pending}, "
        f"orphans {len(result.orphans)}, refusals {len(_refusals(text))}",
    )
    assert _refusals(text) == []
    assert result.clean, result
    assert _held_names(stack, STATUS_TYPE) == [status]
    assert _held_names(stack, SECRET_TYPE) == _names(kube, ns, "secrets") == ["ssh-gpu-d-host-key"]
    stack.preview(expect_no_changes=True)


# --- Azure: an NSG rule -------------------------------------------------------------------------------------------


def test_a_kill_right_after_an_nsg_rule_create_is_healed_by_recover_and_up(
    azure_native: str,
    fake_azure: FakeAzure,
    emulator: EmulatorHandle,
    make_stack: StackFactory,
    tmp_path: Path,
    pytestconfig: pytest.Config,
) -> None:
    firewall = {
        "resourceGroup": "rg-gw",
        "nsgName": "nsg-gw",
        "sourceCidrs": ["203.0.113.0/24"],
        "rules": "perInstance",
    }
    # No azure-native:subscriptionId: recover asks the provider which subscription it found by itself.
    stack = make_stack(stack_config(emulator, [static_instance("vm-a")], firewall=firewall))
    held = fake_azure.hold_after_create("ssh-gateway-vm-a")

    _kill_at_hold(stack, held, tmp_path / "up.log", {})

    assert fake_azure.rule_names() == ["ssh-gateway-vm-a"]
    # The port check starts beside the rule (both wait only for the Pangolin resource): the kill may catch its
    # create begun too.
    pending = _pending_after_kill(stack)
    assert pending is None or ("vm-a-nsg-rule" in pending and set(pending) <= {"vm-a-nsg-rule", "port-check"}), pending
    fake_azure.release()

    report, text = _recover_then_up(stack)

    assert _adopted(report, NSG_RULE_TYPE) == [rule_id(SUBSCRIPTION, "rg-gw", "nsg-gw", "ssh-gateway-vm-a")], report
    result = audit(emulator, stack, ["vm-a"])
    show(
        pytestconfig,
        f"kill after the NSG rule create: recover adopted {len(_adopted(report, NSG_RULE_TYPE))} rule; then up: "
        f"pending {result.pending}, orphans {len(result.orphans)}, refusals "
        f"{len(_refusals(text)) + len(fake_azure.refused)}",
    )
    assert _refusals(text) == [] and fake_azure.refused == []
    assert result.clean, result
    assert _held_names(stack, NSG_RULE_TYPE) == fake_azure.rule_names() == ["ssh-gateway-vm-a"]
    stack.preview(expect_no_changes=True)


def _clear_lock_and_pending(stack: auto.Stack) -> None:
    """What a recovery that only clears leaves: no lock, no pending operation, the objects made left as they are."""
    env = pulumi_env()
    state = stack_state(env["PULUMI_BACKEND_URL"], stack.workspace.project_settings().name, stack.name, env)
    assert state is not None
    for lock in state.locks():
        state.remove_lock(lock)
    exported = stack.export_stack()
    deployment = {**(exported.deployment or {}), "pending_operations": []}
    stack.import_stack(auto.Deployment(version=exported.version, deployment=deployment))


# --- Azure: the merged rule (`firewall.rules: merged`) -----------------------------------------------------------

MERGED_FIREWALL = {"resourceGroup": "rg-gw", "nsgName": "nsg-gw", "sourceCidrs": ["203.0.113.0/24"], "rules": "merged"}


def _merged_rule_clean(fake_azure: FakeAzure, stack: auto.Stack, emulator: EmulatorHandle, names: list[str]) -> None:
    """The one merged rule is in Azure and in the state, and opens exactly the ports the instances bind."""
    rule = merged_rule_name("ssh-gateway", stack.name, "")
    assert _held_names(stack, NSG_RULE_TYPE) == fake_azure.rule_names() == [rule]
    bound = {int(port) for port in stack.outputs()["allocations"].value.values()}
    assert len(bound) == len(names)
    assert ports_of(fake_azure.rules("rg-gw", "nsg-gw")[rule]["destinationPortRanges"]) == bound
    result = audit(emulator, stack, names)
    assert result.clean, result
    stack.preview(expect_no_changes=True)


def test_a_kill_right_after_the_merged_rule_create_is_healed_by_recover_and_up(
    azure_native: str,
    fake_azure: FakeAzure,
    emulator: EmulatorHandle,
    make_stack: StackFactory,
    tmp_path: Path,
    pytestconfig: pytest.Config,
) -> None:
    del azure_native  # asked for so the stand-in serves every command of the stack
    names = [f"vm-{n}" for n in range(4)]
    stack = make_stack(stack_config(emulator, [static_instance(n) for n in names], firewall=MERGED_FIREWALL))
    rule = merged_rule_name("ssh-gateway", stack.name, "")
    held = fake_azure.hold_after_create(rule)

    _kill_at_hold(stack, held, tmp_path / "up.log", {})

    assert fake_azure.rule_names() == [rule]  # Azure made it; the engine never heard
    pending = _pending_after_kill(stack)
    assert pending is None or "firewall-ports" in pending, pending
    fake_azure.release()

    report, text = _recover_then_up(stack)

    adopted = _adopted(report, NSG_RULE_TYPE)
    show(pytestconfig, f"kill after the merged rule's create: recover adopted {len(adopted)} rule; then up")
    assert adopted == [rule_id(SUBSCRIPTION, "rg-gw", "nsg-gw", rule)], report
    assert _refusals(text) == [] and fake_azure.refused == []
    _merged_rule_clean(fake_azure, stack, emulator, names)


def test_a_kill_right_after_the_merged_rules_update_for_a_new_instance_is_healed_by_up(
    azure_native: str,
    fake_azure: FakeAzure,
    emulator: EmulatorHandle,
    make_stack: StackFactory,
    tmp_path: Path,
    pytestconfig: pytest.Config,
) -> None:
    del azure_native
    names = [f"vm-{n}" for n in range(4)]
    stack = make_stack(stack_config(emulator, [static_instance(n) for n in names[:3]], firewall=MERGED_FIREWALL))
    stack.up()
    rule = merged_rule_name("ssh-gateway", stack.name, "")
    make_stack(stack_config(emulator, [static_instance(n) for n in names], firewall=MERGED_FIREWALL), name=stack.name)
    held = fake_azure.hold_after_update(rule)  # the +1: its port added to the rule, the engine not told

    _kill_at_hold(stack, held, tmp_path / "up.log", {})

    opened = ports_of(fake_azure.rules("rg-gw", "nsg-gw")[rule]["destinationPortRanges"])
    assert len(opened) == len(names), opened  # Azure has the new port; the state has the rule's old ports
    fake_azure.release()

    report, text = _recover_then_up(stack)

    show(pytestconfig, f"kill after the merged rule's update: recover done {report.get('done')}; then up")
    assert _refusals(text) == [] and fake_azure.refused == []
    _merged_rule_clean(fake_azure, stack, emulator, names)
