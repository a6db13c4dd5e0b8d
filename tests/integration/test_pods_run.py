"""An instance pod as a platform runs one, on the real node (kubelet, containerd, kube-proxy): the instance image's
sshd serves the host key and certificate of its mounted Secret, and a user's `ssh` goes through the real Traefik
to the Service's NodePort, kube-proxy and the pod, trusting only the stack's `@cert-authority` line.

The stack is a real one's: `from: pods`, host identity on, `kubernetes.nodeIp` the node's NodePort address, no
skipAwait. The pod is created first, as a platform does; it waits for its Secret until the stack's `up` makes it.
"""

from __future__ import annotations

import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from pangolin_emulator.harness import EmulatorHandle
from ssh_gateway.core.outputs import parse_stack_outputs
from ssh_gateway.core.settings import Discovery
from ssh_gateway.local.control_plane import ControlPlane
from ssh_gateway.local.kubelet_node import KubeletNode
from ssh_gateway.local.node_pods import create_instance_pod, load_instance_image, pod_ready
from ssh_gateway.local.sshd import ClientKey, ensure_client_keypair
from ssh_gateway.local.traefik import TraefikProcess
from ssh_gateway.ops.tools.demo_steps import write_ssh_files

from .conftest import StackFactory, stack_config
from .local_ports import free_port_block
from .test_cluster_acts import EXPOSE, NAME_LABEL, get, wait_for

pytestmark = pytest.mark.integration


def _ssh(root: Path, outputs: dict[str, Any], key: ClientKey, instance: str) -> subprocess.CompletedProcess[str]:
    """The user's `ssh ssh-<instance>` with the stack's generated block and known_hosts, and nothing else."""
    config = write_ssh_files(parse_stack_outputs(outputs), root, key)
    argv = ["ssh", "-v", "-F", str(config), "-o", "BatchMode=yes", "-o", "ConnectTimeout=5", f"ssh-{instance}"]
    return subprocess.run([*argv, "cat /etc/hostname"], capture_output=True, text=True, timeout=30, check=False)


def _ssh_once_it_answers(
    root: Path, outputs: dict[str, Any], key: ClientKey, instance: str, *, within: float
) -> subprocess.CompletedProcess[str]:
    """`_ssh` again until it logs in, as a user retries: kube-proxy routes the NodePort at its next sync after the
    pod turns Ready (until then it refuses the connection, a Service without endpoints)."""
    deadline = time.monotonic() + within
    while (answer := _ssh(root, outputs, key, instance)).returncode != 0 and time.monotonic() < deadline:
        time.sleep(0.2)
    return answer


def test_ssh_reaches_the_pods_sshd_through_traefik_and_the_node_port(
    kube: ControlPlane,
    kubelet_node: KubeletNode,
    emulator: EmulatorHandle,
    make_stack: StackFactory,
    tmp_path: Path,
) -> None:
    image = load_instance_image(kubelet_node, tmp_path)
    namespace, instance = f"it-{uuid.uuid4().hex[:8]}", "gpu-alice"
    kube.create_namespace(namespace)
    client = ensure_client_keypair(tmp_path / "client" / "id_ed25519", "pods-run")
    section = {"from": "pods", "namespaces": [namespace], "selector": EXPOSE, "nameLabel": NAME_LABEL}
    discovery = Discovery.model_validate(section)
    ports = free_port_block(4)
    config = stack_config(
        emulator,
        [],
        port_range=f"{ports.start}-{ports.stop - 1}",
        gateway={"hostTemplate": "127.0.0.1"},
        kubernetes={
            "namespace": namespace,
            "kubeconfig": str(kube.kubeconfig),
            "nodeIp": kubelet_node.node_port_address,
        },
        discovery=section,
    )
    created = time.monotonic()
    create_instance_pod(
        kubelet_node, instance=instance, namespace=namespace, image=image, discovery=discovery, keys=[client.public_key]
    )

    outputs = {k: v.value for k, v in make_stack(config).up().outputs.items()}
    up_done = time.monotonic() - created
    assert list(outputs["endpoints"]) == [instance]
    known_hosts = str(outputs["knownHosts"]).strip().splitlines()
    assert known_hosts and all(line.startswith("@cert-authority ") for line in known_hosts), known_hosts
    traefik = TraefikProcess(
        tmp_path / "traefik", outputs["gateway"]["traefikEntryPoints"], emulator.traefik_config_url
    )
    traefik.start()
    try:
        traefik.wait_for_routers(lambda routers: len(routers) == 1)
        wait_for("the pod Ready", lambda: pod_ready(get(kube, f"/api/v1/namespaces/{namespace}/pods/{instance}")), 120)
        ready = time.monotonic() - created
        answer = _ssh_once_it_answers(tmp_path, outputs, client, instance, within=15.0)
        logged_in = time.monotonic() - created
    finally:
        traefik.stop()
    assert answer.returncode == 0, answer.stderr
    assert answer.stdout.strip() == instance  # the pod's own hostname: its sshd, not a stand-in
    assert "matches the ED25519-CERT host certificate" in answer.stderr  # the issued certificate, from the Secret
    print(f"pod created -> up done {up_done:.1f} s, pod Ready {ready:.1f} s, ssh logged in {logged_in:.1f} s")
