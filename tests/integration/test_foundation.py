"""The toolchain end to end: a stack of the project with a dynamic resource (Pangolin) and a
pulumi-kubernetes resource (rendered to a directory), through preview, up, a no-op preview, and destroy."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pulumi.automation import OpType

from pangolin_emulator.harness import EmulatorHandle
from ssh_gateway.core.host_identity import HOST_PUBLIC_KEY_FILE
from ssh_gateway.ops.shared.automation import state_file
from ssh_gateway.ops.tools.host_identity_files import stack_identity_files
from ssh_gateway.plumbing.toolchain import pulumi_env

from .conftest import StackFactory, exported_resources, stack_config

pytestmark = pytest.mark.integration


def test_preview_up_noop_destroy(emulator: EmulatorHandle, make_stack: StackFactory, tmp_path: Path) -> None:
    render_dir = tmp_path / "rendered"
    stack = make_stack(
        stack_config(emulator, [{"name": "gpu-k8s", "target": "clusterIp", "user": "dev"}], render_dir=render_dir)
    )

    preview = stack.preview()
    # The stack, the allocation, the k8s provider, the component, its Service and its Pangolin resource.
    assert preview.change_summary.get(OpType.CREATE, 0) >= 5

    up = stack.up()
    outputs = {k: v.value for k, v in up.outputs.items()}
    port = outputs["allocations"]["gpu-k8s"]
    assert port == 40000
    assert outputs["endpoints"]["gpu-k8s"] == {
        "pangolinResourceId": emulator.state()["resources"][0]["resourceId"],
        "routing": "port",
        "host": "ssh-gpu-k8s.example.test",
        "port": 40000,
        "user": "dev",
        "ssh": "ssh -p 40000 dev@ssh-gpu-k8s.example.test",
    }
    manifests = "\n".join(p.read_text() for p in render_dir.rglob("*.yaml"))
    assert "name: ssh-gpu-k8s" in manifests and "namespace: gpu-dev" in manifests
    # No Secret rendered (it would be the host's private key in plaintext on disk): warned, and no output holds
    # it either: `ssh-gateway host-identity` derives the files from the stack's state.
    assert "kind: Secret" not in manifests and "PRIVATE KEY" not in manifests
    assert "the host-key Secrets of gpu-k8s are not rendered" in up.stderr + up.stdout
    assert "hostIdentities" not in outputs
    files = stack_identity_files(stack.name, "gpu-k8s")
    assert outputs["hostKeys"]["gpu-k8s"].endswith(" " + files[HOST_PUBLIC_KEY_FILE].strip())

    state = emulator.state()
    [resource] = state["resources"]
    assert resource["proxyPort"] == 40000
    assert resource["name"].endswith("/gpu-k8s")
    [target] = state["targets"]
    assert target["resourceId"] == resource["resourceId"]
    assert (target["ip"], target["port"]) == ("ssh-gpu-k8s.gpu-dev.svc.cluster.local", 22)

    stack.preview(expect_no_changes=True)

    secret = emulator.api_key.split(".")[1]
    assert secret not in state_file(stack).read_text()
    # Decrypted, the key appears only as the stack config handed to the dynamic-provider plugin, as a secret.
    resources = exported_resources(stack)
    holders = [r for r in resources if secret in json.dumps(r)]
    assert [r["type"] for r in holders] == ["pulumi:providers:pulumi-python"]

    stack.destroy()
    assert emulator.state()["resources"] == []
    assert not list(render_dir.rglob("*.yaml"))


def test_toolchain_is_pinned_and_offline() -> None:
    import subprocess

    env = pulumi_env()
    version = subprocess.run(["pulumi", "version"], env=env, capture_output=True, text=True, check=True).stdout
    assert version.strip() == "v3.259.0"
    plugins = subprocess.run(["pulumi", "plugin", "ls"], env=env, capture_output=True, text=True, check=True)
    assert "kubernetes" in plugins.stdout
    assert env["PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION"] == "true"
    assert env["PULUMI_BACKEND_URL"].startswith("file://")
