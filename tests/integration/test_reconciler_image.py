"""The reconciler's image (scripts/build-reconciler-image, cached by content) run as the Deployment runs it: runc,
uid 65532, a read-only root, `reconcile --once --ambient --skip-preview` of a stack that discovers two platform
Services on the tests' kube-apiserver, against the Pangolin emulator, with a file backend shared with the host."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import pytest

from pangolin_emulator.harness import EmulatorHandle
from ssh_gateway.core.names import LAST_UP_ANNOTATION
from ssh_gateway.local.control_plane import ControlPlane
from ssh_gateway.local.reconciler_image import build_image, run_image, shared_dir
from ssh_gateway.ops.shared.automation import open_stack, remove_stack, stack_file

pytestmark = pytest.mark.integration

EXPOSE = {"ssh-gateway.io/expose": "true"}


@pytest.fixture(scope="module")
def image() -> str:
    assert os.geteuid() == 0, "the image is built and run as root (chroot, runc)"
    return build_image()


def test_the_image_runs_reconcile_once_as_the_deployment_does(
    image: str, kube: ControlPlane, kube_namespace: str, emulator: EmulatorHandle, tmp_path: Path
) -> None:
    with kube.client() as api:
        for name in ("alice", "bob"):
            service = {
                "metadata": {"name": f"ssh-{name}", "labels": EXPOSE},
                "spec": {"type": "NodePort", "selector": {"app": name}, "ports": [{"port": 22}]},
            }
            api.post(f"/api/v1/namespaces/{kube_namespace}/services", json=service).raise_for_status()
    tmp_path.chmod(0o755)  # the container's user walks down to the shared directory
    kubeconfig, backend = shared_dir(kube, tmp_path / "share")
    name = f"img-{uuid.uuid4().hex[:6]}"
    config = {
        "ssh-gateway:pangolin": {"url": emulator.url, "orgId": emulator.org_id, "siteId": emulator.site_id},
        "ssh-gateway:ports": {"range": "40000-40019"},
        "ssh-gateway:gateway": {"hostTemplate": "ssh-{instance}.example.test"},
        "ssh-gateway:firewall": {"enabled": False},
        "ssh-gateway:kubernetes": {
            "namespace": kube_namespace,
            "kubeconfig": str(kubeconfig),
            "nodeIp": "127.0.0.1",
        },
        "ssh-gateway:discovery": {"from": "services", "namespaces": [kube_namespace], "selector": EXPOSE},
    }
    stack = open_stack(
        name, config, secrets={"pangolin:apiKey": emulator.api_key}, env={"PULUMI_BACKEND_URL": f"file://{backend}"}
    )
    try:
        stack_file(name).chmod(0o644)
        for path in backend.rglob("*"):
            path.chmod(0o777 if path.is_dir() else 0o666)
        run = run_image(
            image,
            tmp_path,
            args=["reconcile", "--once", "--ambient", "--skip-preview", "--stack", name],
            env={
                "PULUMI_BACKEND_URL": f"file://{backend}",
                "PULUMI_CONFIG_PASSPHRASE": "ssh-gateway-local-stacks-only",
                "POD_NAME": "reconciler-image-0",
            },
            share=tmp_path / "share",
            stack_file=stack_file(name),
        )
        print(f"runc exit {run.code} in {run.seconds:.1f} s")
        assert run.code == 0, run.output[-5000:]
        events = [json.loads(line)["event"] for line in run.output.splitlines() if line.startswith('{"ts"')]
        assert "recover" in events
        assert "up" in events
        made = sorted(str(r["name"]) for r in emulator.state()["resources"])
        assert made == [f"ssh-gateway/{name}/alice", f"ssh-gateway/{name}/bob"]
        with kube.client() as api:
            status = api.get(f"/api/v1/namespaces/{kube_namespace}/configmaps/ssh-gateway-status-{name}").json()
            lease = api.get(
                f"/apis/coordination.k8s.io/v1/namespaces/{kube_namespace}/leases/ssh-gateway-reconcile-{name}"
            ).json()
        assert {"instance.alice.json", "instance.bob.json"} <= set(status["data"])
        assert json.loads(lease["metadata"]["annotations"][LAST_UP_ANNOTATION])["code"] == 0
    finally:
        try:
            stack.destroy()
        finally:
            remove_stack(stack)
