"""Integration layer: the real pulumi CLI through the Automation API, against the Pangolin emulator.

A missing toolchain fails these tests (it never skips them): run scripts/bootstrap.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from pulumi import automation as auto

from pangolin_emulator.harness import EmulatorHandle, running_emulator
from ssh_gateway.local.azurite import Azurite, AzuriteError, start_azurite, stop_azurite
from ssh_gateway.local.control_plane import ControlPlane, ControlPlaneError, start_control_plane, stop_control_plane
from ssh_gateway.local.istio_crds import install_istio_crds
from ssh_gateway.local.kubelet_node import KubeletNode, KubeletNodeError, start_kubelet_node
from ssh_gateway.ops.shared.automation import open_stack, remove_stack
from ssh_gateway.plumbing.toolchain import ToolchainMissing, pulumi_env

from .fake_azure import FakeAzure, fake_azure_native

StackFactory = Callable[..., auto.Stack]


@pytest.fixture(scope="session", autouse=True)
def toolchain() -> dict[str, str]:
    try:
        return pulumi_env()
    except ToolchainMissing as exc:
        pytest.fail(str(exc))


@pytest.fixture
def emulator(tmp_path: Path) -> Iterator[EmulatorHandle]:
    with running_emulator(tmp_path / "pangolin") as handle:
        yield handle


def stack_config(
    emulator: EmulatorHandle,
    instances: list[dict[str, Any]],
    *,
    port_range: str = "40000-40019",
    render_dir: Path | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """A local stack's `ssh-gateway:*` config against `emulator`."""
    config: dict[str, Any] = {
        "ssh-gateway:pangolin": {"url": emulator.url, "orgId": emulator.org_id, "siteId": emulator.site_id},
        "ssh-gateway:ports": {"range": port_range},
        "ssh-gateway:gateway": {"hostTemplate": "ssh-{instance}.example.test"},
        "ssh-gateway:firewall": {"enabled": False},
        "ssh-gateway:instances": instances,
    }
    if render_dir is not None:
        config["ssh-gateway:kubernetes"] = {"namespace": "gpu-dev", "renderDir": str(render_dir)}
    config.update({f"ssh-gateway:{k}": v for k, v in extra.items()})
    return config


@pytest.fixture
def make_stack(emulator: EmulatorHandle) -> Iterator[StackFactory]:
    """Creates stacks of the project (files in stacks/) and destroys and removes them afterwards."""
    made: dict[str, auto.Stack] = {}

    def make(config: dict[str, Any], *, name: str | None = None) -> auto.Stack:
        """A new stack, or with `name` the same stack with new config."""
        stack = open_stack(name or f"it-{uuid.uuid4().hex[:8]}", config, secrets={"pangolin:apiKey": emulator.api_key})
        made[stack.name] = stack
        return stack

    yield make
    for stack in made.values():
        try:
            stack.destroy()
        finally:
            remove_stack(stack)


def static_instance(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "target": "static", "staticHost": "127.0.0.1", "staticPort": 2222, **extra}


# --- the Azure stand-in (fake_azure.py) --------------------------------------------------------------------


@pytest.fixture(name="fake_azure")
def fake_azure_fixture() -> FakeAzure:
    """The stand-in's objects, for a test that looks at them (ask for it with `azure_native`)."""
    return FakeAzure()


@pytest.fixture(name="azure_native")
def azure_native_fixture(monkeypatch: pytest.MonkeyPatch, fake_azure: FakeAzure) -> Iterator[str]:
    """The fake, for the stacks and CLI runs of one test. Ask for it before `make_stack`, so that it outlives
    the stacks' destroy at teardown."""
    with fake_azure_native(fake_azure) as debug:
        monkeypatch.setenv("PULUMI_DEBUG_PROVIDERS", debug)
        yield debug


# --- a real shared state backend: Azure Blob, served by Azurite (ssh_gateway/local/azurite.py) ------------


@pytest.fixture(scope="session")
def azurite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Azurite]:
    """azurite-blob on a free loopback port for the session, with the container `pulumi-state`; `azurite.env()`
    points the CLI at it. Stacks on it need unique names (every test's are)."""
    try:
        handle = start_azurite(tmp_path_factory.mktemp("azurite"))
    except (ToolchainMissing, AzuriteError) as exc:
        pytest.fail(f"no Azure Blob backend for the tests: {exc}")
    try:
        yield handle
    finally:
        stop_azurite(handle, remove_data=True)


# --- the cluster that acts (local/control_plane.py) -------------------------------------------------------


@pytest.fixture(scope="session")
def kube(tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config) -> Iterator[ControlPlane]:
    """The cluster that acts (etcd, kube-apiserver, the controllers, the scheduler, kwok's nodes) on loopback for
    the session; a binary that is not built fails the tests."""
    try:
        plane = start_control_plane(tmp_path_factory.mktemp("kube"))
    except (ToolchainMissing, ControlPlaneError) as exc:
        pytest.fail(f"no Kubernetes API server for the tests: {exc}")
    line = (
        f"cluster ready in {plane.startup_seconds:.1f}s at {plane.url} "
        f"({', '.join(f'{name} {pid}' for name, pid in plane.pids.items())}; logs in {plane.root})"
    )
    # Shown on the terminal even while pytest captures output (the fixture starts inside the first test).
    capture = pytestconfig.pluginmanager.get_plugin("capturemanager")
    reporter = pytestconfig.pluginmanager.get_plugin("terminalreporter")
    if capture is not None and reporter is not None:
        with capture.global_and_fixture_disabled():
            reporter.write_line(line)
    try:
        yield plane
    finally:
        stop_control_plane(plane, remove_data=True)


@pytest.fixture
def kube_namespace(kube: ControlPlane) -> str:
    """A fresh namespace per test. It is left for the session's end (the whole etcd goes away with it): a test
    that deletes a namespace does so on purpose."""
    name = f"it-{uuid.uuid4().hex[:8]}"
    kube.create_namespace(name)
    return name


@pytest.fixture(scope="module")
def kubelet_node(kube: ControlPlane) -> Iterator[KubeletNode]:
    """The real node (containerd, kubelet, kube-proxy; local/kubelet_node.py) joined to the session's cluster for
    a module's tests, and taken down with everything it made after them."""
    try:
        node = start_kubelet_node(kube)
    except (ToolchainMissing, KubeletNodeError) as exc:
        pytest.fail(f"no real node for the tests: {exc}")
    try:
        yield node
    finally:
        node.stop()


@pytest.fixture(scope="session")
def istio_crds(kube: ControlPlane) -> list[str]:
    """Istio's CRDs (SSH_GATEWAY_ISTIO_CRDS, from istio.io/api) installed and served by the session's API server."""
    try:
        return install_istio_crds(kube)
    except (ToolchainMissing, ControlPlaneError) as exc:
        pytest.fail(f"cannot install Istio's CRDs: {exc}")


def exported_resources(stack: auto.Stack) -> list[dict[str, Any]]:
    """The stack's resources as `pulumi stack export` shows them (secrets decrypted)."""
    deployment = stack.export_stack().deployment
    assert deployment is not None
    return list(deployment["resources"])


def change_by_hand(emulator: EmulatorHandle, instance: str, **fields: Any) -> int:
    """Changes an instance's Pangolin resource behind the stack's back, as someone in the dashboard would;
    returns the resource's id."""
    resource = next(r for r in emulator.state()["resources"] if r["name"].endswith(f"/{instance}"))
    httpx.post(
        f"{emulator.url}/resource/{resource['resourceId']}",
        json=fields,
        headers={"Authorization": f"Bearer {emulator.api_key}"},
        timeout=10,
    ).raise_for_status()
    return int(resource["resourceId"])
