"""The reconciler's image run for real: `python -m benchmarks.reconciler_image OCI_LAYOUT[:TAG]` (root, umoci, runc).

scripts/build-reconciler-image --oci DIR writes the image; this unpacks it with umoci and runs its entry point
with runc, as the Deployment would (uid 65532, a read-only root, a tmpfs /tmp, `--ambient`): `reconcile --once
--ambient --skip-preview` of a stack that discovers two platform Services on a local kube-apiserver, against the
Pangolin emulator, with a file backend shared with the host. It prints the reconciler's log lines and what it
made (Pangolin resources, the status ConfigMap's keys, the Lease's record), and exits 0 when the `up` succeeded
and made both. The container shares the host's network (the API server and the emulator are on loopback).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import yaml

from pangolin_emulator.harness import running_emulator
from ssh_gateway.local.control_plane import ControlPlane, start_control_plane, stop_control_plane
from ssh_gateway.ops.shared.automation import open_stack, remove_stack, stack_file

NAMESPACE = "gpu-users"
EXPOSE = {"ssh-gateway.io/expose": "true"}


def _platform_services(plane: ControlPlane) -> None:
    with plane.client() as api:
        for i, name in enumerate(("alice", "bob")):
            service = {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": f"ssh-{name}", "labels": EXPOSE},
                "spec": {"type": "NodePort", "selector": {"app": name}, "ports": [{"port": 22, "nodePort": 30400 + i}]},
            }
            api.post(f"/api/v1/namespaces/{NAMESPACE}/services", json=service).raise_for_status()


def _shared(plane: ControlPlane, share: Path) -> Path:
    """A kubeconfig the container's user can read (the CA inline), and a backend directory it can write."""
    share.mkdir(mode=0o777)
    share.chmod(0o777)
    kubeconfig = yaml.safe_load(plane.kubeconfig.read_text())
    cluster = kubeconfig["clusters"][0]["cluster"]
    ca = Path(cluster.pop("certificate-authority")).read_bytes()
    cluster["certificate-authority-data"] = base64.b64encode(ca).decode()
    (share / "kubeconfig").write_text(yaml.safe_dump(kubeconfig))
    (share / "kubeconfig").chmod(0o644)
    backend = share / "backend"
    backend.mkdir(mode=0o777)
    backend.chmod(0o777)
    return backend


def _spec(bundle: Path, stack: str, share: Path, backend: Path) -> None:
    """The image's own runtime config, with the run's arguments, environment and mounts."""
    spec: dict[str, Any] = json.loads((bundle / "config.json").read_text())
    process = spec["process"]
    process["args"] = [*process["args"][:3], "reconcile", "--once", "--ambient", "--skip-preview", "--stack", stack]
    process["env"] += [
        f"PULUMI_BACKEND_URL=file://{backend}",
        "PULUMI_CONFIG_PASSPHRASE=ssh-gateway-local-stacks-only",
        "POD_NAME=reconciler-image-0",
    ]
    process["terminal"] = False
    spec["linux"]["namespaces"] = [n for n in spec["linux"]["namespaces"] if n["type"] != "network"]
    spec["root"]["readonly"] = True
    spec["mounts"] += [
        {"destination": "/tmp", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "nodev"]},  # noqa: S108
        {"destination": str(share), "type": "bind", "source": str(share), "options": ["rbind", "rw"]},
        {
            "destination": f"/opt/ssh-gateway/stacks/Pulumi.{stack}.yaml",
            "type": "bind",
            "source": str(stack_file(stack)),
            "options": ["rbind", "ro"],
        },
    ]
    (bundle / "config.json").write_text(json.dumps(spec))


def main(image: str) -> int:
    work = Path(tempfile.mkdtemp(prefix="reconciler-image-"))
    work.chmod(0o755)
    bundle = work / "bundle"
    unpack = ["umoci", "unpack", "--image", image, str(bundle)]
    subprocess.run(unpack, check=True, capture_output=True)  # noqa: S603 - the image named by the caller
    plane = start_control_plane(work / "kube")
    try:
        plane.create_namespace(NAMESPACE)
        _platform_services(plane)
        share = work / "share"
        backend = _shared(plane, share)
        with running_emulator(work / "pangolin") as emulator:
            name = f"img-{uuid.uuid4().hex[:6]}"
            config = {
                "ssh-gateway:pangolin": {"url": emulator.url, "orgId": emulator.org_id, "siteId": emulator.site_id},
                "ssh-gateway:ports": {"range": "40000-40019"},
                "ssh-gateway:gateway": {"hostTemplate": "ssh-{instance}.example.test"},
                "ssh-gateway:firewall": {"enabled": False},
                "ssh-gateway:kubernetes": {
                    "namespace": NAMESPACE,
                    "kubeconfig": str(share / "kubeconfig"),
                    "nodeIp": "127.0.0.1",
                    "skipAwait": True,
                },
                "ssh-gateway:discovery": {"from": "services", "namespaces": [NAMESPACE], "selector": EXPOSE},
            }
            env = {"PULUMI_BACKEND_URL": f"file://{backend}"}
            stack = open_stack(name, config, secrets={"pangolin:apiKey": emulator.api_key}, env=env)
            stack_file(name).chmod(0o644)
            for path in backend.rglob("*"):
                path.chmod(0o777 if path.is_dir() else 0o666)
            _spec(bundle, name, share, backend)
            started = time.monotonic()
            done = subprocess.run(  # noqa: S603
                ["runc", "run", "--bundle", str(bundle), f"reconciler-{name}"],  # noqa: S607
                capture_output=True,
                text=True,
                check=False,
            )
            took = time.monotonic() - started
            for line in (done.stdout + done.stderr).splitlines():
                if line.startswith('{"ts"') or line.startswith("recover "):
                    print(f"  {line}")
            made = sorted(str(r["name"]) for r in emulator.state()["resources"])
            with plane.client() as api:
                status = api.get(f"/api/v1/namespaces/{NAMESPACE}/configmaps/ssh-gateway-status-{name}").json()
                lease = api.get(
                    f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases/ssh-gateway-reconcile-{name}"
                ).json()
            print(f"runc exit {done.returncode} in {took:.1f} s; Pangolin resources {made}")
            print(f"status ConfigMap keys {sorted(status.get('data') or {})}")
            print(f"Lease {lease.get('spec')} {(lease.get('metadata') or {}).get('annotations')}")
            try:
                stack.destroy()
            finally:
                remove_stack(stack)
            return 0 if done.returncode == 0 and len(made) == 2 else 1
    finally:
        stop_control_plane(plane, remove_data=True)
        shutil.rmtree(bundle, ignore_errors=True)


if __name__ == "__main__":
    if len(sys.argv) != 2 or os.geteuid() != 0:
        print("usage (as root): python -m benchmarks.reconciler_image OCI_LAYOUT:TAG", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
