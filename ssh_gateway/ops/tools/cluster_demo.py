"""Seed A's flow on this machine (`scripts/demo-cluster`): a platform's cluster with the reconciler deployed, a GPU
user's pod created, and `ssh` into that pod through the gateway.

    scripts/demo-cluster    bootstrap, then every step below, each with what it does and how long it took; stop
                            and remove everything it started; exit 0 iff ssh reached the pod

1. the cluster that acts (etcd, kube-apiserver, the controllers, the scheduler, kwok's GPU nodes) and one real node
   (containerd, kubelet, kube-proxy: ssh_gateway/local/kubelet_node.py), as the tests run them;
2. Pangolin (the emulator) and Azurite, the stack's `azblob://` backend, each reachable from the pods at the node;
3. the stack `demo-cluster` (`from: pods` in namespace `gpu-users`), and the reconciler installed as
   docs/reconciler.md tells a platform team: its image loaded into the node, the backend's Secret, an overlay of
   `overlays/from-pods`, `kubectl apply -k`, two replicas;
4. a user's pod: the instance image's sshd (scripts/build-instance-image), the user's key in a ConfigMap; the
   reconciler sees it, its `up` makes the pod's Service and host-key Secret, the pod starts and serves them;
5. Traefik on the stack's entry points, fed by Pangolin's HTTP provider, as Pangolin's gateway host runs it;
6. `ssh ssh-alice` with the stack's generated block and known_hosts (one `@cert-authority` line,
   `StrictHostKeyChecking yes`): Traefik, the Service's NodePort, kube-proxy, the pod's sshd.
State (keys, logs, the cluster's data) lives in .pulumi-state/demo-cluster/ and goes at the end.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pulumi import automation as auto

from pangolin_emulator.harness import running_emulator
from ssh_gateway.core.outputs import parse_stack_outputs
from ssh_gateway.core.settings import Discovery
from ssh_gateway.local import traefik
from ssh_gateway.local.azurite import start_azurite, stop_azurite
from ssh_gateway.local.control_plane import ControlPlane, start_control_plane, stop_control_plane
from ssh_gateway.local.kubelet_node import KubeletNode, start_kubelet_node
from ssh_gateway.local.node_pods import create_instance_pod, load_instance_image, pod_ready
from ssh_gateway.local.reconciler_install import (
    STATUS_NAMESPACE,
    in_cluster_stack,
    install_reconciler,
    uninstall_reconciler,
)
from ssh_gateway.local.sshd import ClientKey, ensure_client_keypair
from ssh_gateway.ops.exit_codes import ExitCode
from ssh_gateway.ops.shared.automation import open_stack, remove_stack, stack_file
from ssh_gateway.ops.tools.demo_steps import say, ssh_answer, step, write_ssh_files
from ssh_gateway.plumbing.toolchain import REPO, pulumi_env

__all__ = ["NAMESPACE", "STACK", "ClusterRig", "run_cluster_demo", "start_cluster_rig"]

STACK = "demo-cluster"
NAMESPACE = "gpu-users"
INSTANCE = "alice"
PORTS = "24500-24509"
"""Apart from scripts/demo's 40000-40019, and below the kernel's ephemeral ports (32768-60999 here): on a busy
machine an outgoing connection's local port there can take an entry point's port before Traefik binds it."""
_KEY_COMMENT = "ssh-gateway demo-cluster"


def _wait(what: str, check: Callable[[], Any], timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while not (found := check()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {timeout:.0f}s")
        time.sleep(0.2)
    return found


def _get(plane: ControlPlane, path: str) -> dict[str, Any]:
    with plane.client() as api:
        response = api.get(path)
    found: dict[str, Any] = response.json() if response.status_code == 200 else {}
    return found


def _cluster(rig: ExitStack, state: Path) -> tuple[ControlPlane, KubeletNode]:
    with step("the cluster: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok's GPU nodes"):
        plane = start_control_plane(state / "kube")
        rig.callback(stop_control_plane, plane, remove_data=True)
        say(f"    {plane.url}, kubeconfig {plane.kubeconfig}")
    with step("a real node joins it: containerd, kubelet, kube-proxy (pods on 10.245.0.0/24, NodePorts on 127.0.0.2)"):
        node = start_kubelet_node(plane)
        rig.callback(node.stop)
    return plane, node


def _stack(rig: ExitStack, state: Path, plane: ControlPlane, node: KubeletNode) -> tuple[auto.Stack, str]:
    with step("Pangolin (the emulator) and Azurite (the stack's azblob:// backend), relayed to the pods"):
        emulator = rig.enter_context(running_emulator(state / "pangolin"))
        azurite = start_azurite(state / "azurite")
        rig.callback(stop_azurite, azurite, remove_data=True)
    with step(f"the stack {STACK}: from: pods in namespace {NAMESPACE}, its status in {STATUS_NAMESPACE}"):
        plane.create_namespace(NAMESPACE)
        config = in_cluster_stack(node, emulator, NAMESPACE, port_range=PORTS, host_template="127.0.0.1")
        env = {**azurite.env(), "KUBECONFIG": str(plane.kubeconfig)}
        stack = open_stack(STACK, config, secrets={"pangolin:apiKey": emulator.api_key}, env=env)
        rig.callback(_destroy, stack)
        stack_file(STACK).chmod(0o644)  # the replicas run as uid 65532
    with step("the reconciler, as docs/reconciler.md installs it: image into the node, kubectl apply -k, 2 replicas"):
        passphrase = pulumi_env()["PULUMI_CONFIG_PASSPHRASE"]
        overlay = install_reconciler(
            node, plane, azurite, stack_file=stack_file(STACK), namespace=NAMESPACE, passphrase=passphrase, work=state
        )
        rig.callback(uninstall_reconciler, node, plane, overlay)
        deployment = f"/apis/apps/v1/namespaces/{STATUS_NAMESPACE}/deployments/ssh-gateway-reconciler"
        try:
            _wait(
                "two Ready replicas", lambda: _get(plane, deployment).get("status", {}).get("readyReplicas") == 2, 300
            )
        except TimeoutError:
            _say_replicas(plane, node)
            raise
    return stack, emulator.traefik_config_url


def _say_replicas(plane: ControlPlane, node: KubeletNode) -> None:
    """Each replica's phase and its log's last lines (`kubectl logs` does not reach this node's kubelet)."""
    for pod in _get(plane, f"/api/v1/namespaces/{STATUS_NAMESPACE}/pods").get("items", []):
        name = pod["metadata"]["name"]
        say(f"    replica {name}: {pod['status'].get('phase')}, {pod['status'].get('containerStatuses')}")
        for line in node.logs(STATUS_NAMESPACE, name).splitlines()[-15:]:
            say(f"      {line}")


def _destroy(stack: auto.Stack) -> None:
    try:
        stack.cancel()  # the lock of an up the teardown stopped
        stack.destroy(color="never")
    finally:
        remove_stack(stack)


@dataclass
class ClusterRig:
    """What the demo stands up (and benchmarks/pods_run.py measures on): the cluster and its real node, the stack
    and the reconciler in it, the instance image in the node, the user's key."""

    state: Path
    plane: ControlPlane
    node: KubeletNode
    stack: auto.Stack
    feed: str
    """Pangolin's Traefik provider endpoint."""
    image: str
    keys: ClientKey
    in_ssh_files: set[str] = field(default_factory=set)
    """The instances the ssh files were last written with."""

    def create_pod(self, instance: str) -> None:
        section = {"from": "pods", "namespaces": [NAMESPACE], "selector": {"ssh-gateway.io/expose": "true"}}
        discovery = Discovery.model_validate({**section, "nameLabel": "ssh-gateway.io/instance"})
        keys = [self.keys.public_key]
        create_instance_pod(
            self.node, instance=instance, namespace=NAMESPACE, image=self.image, discovery=discovery, keys=keys
        )

    def endpoint(self, instance: str) -> Any:
        """The instance's endpoint in the stack's status ConfigMap, once the reconciler's `up` put it there."""
        status = f"/api/v1/namespaces/{STATUS_NAMESPACE}/configmaps/ssh-gateway-status-{STACK}"
        entry = (_get(self.plane, status).get("data") or {}).get(f"instance.{instance}.json")
        return entry and json.loads(entry).get("endpoint")

    def get(self, path: str) -> dict[str, Any]:
        """An object of the cluster as its API answers it; {} when it is not there (yet)."""
        return _get(self.plane, path)

    def pod(self, instance: str) -> dict[str, Any]:
        return _get(self.plane, f"/api/v1/namespaces/{NAMESPACE}/pods/{instance}")

    def start_traefik(self, rig: ExitStack, routers: int) -> None:
        """Traefik on the stack's entry points (its whole port range, from the outputs of any `up`), once it
        serves `routers` routers."""
        outputs = parse_stack_outputs(_outputs(self.stack))
        entry_points = dict(outputs.gateway.traefik_entry_points) if outputs.gateway is not None else {}
        gateway = traefik.TraefikProcess(self.state / "traefik", entry_points, self.feed)
        gateway.start()
        rig.callback(gateway.stop)
        gateway.wait_for_routers(lambda held: len(held) == routers)

    def ssh_files(self, instance: str) -> bool:
        """Whether the ssh files name the instance: the stack's outputs as a laptop has them after the `up` that
        made it (read again until that `up` has finished: the status shows the endpoint before the outputs are
        saved)."""
        if instance not in self.in_ssh_files:
            outputs = parse_stack_outputs(_outputs(self.stack))
            if instance not in outputs.endpoints:
                return False
            write_ssh_files(outputs, self.state, self.keys)
            self.in_ssh_files.update(outputs.endpoints)
        return True

    def ssh(self, instance: str) -> str | None:
        """What the pod's shell answers through the gateway, or None when ssh did not get in."""
        if not self.ssh_files(instance):
            return None
        config = self.state / "ssh_config"
        where = "Traefik, the NodePort, kube-proxy"
        answer = ssh_answer(config, instance, f"ssh-{instance}", where, who="root@$(cat /etc/hostname)")
        return answer.text if answer.ok else None


def _outputs(stack: auto.Stack, tries: int = 5) -> dict[str, Any]:
    """The stack's outputs, read again when a reconciler's `up` changed them between the two reads the Automation
    API makes (its masked and its plain read then hold different keys: a KeyError)."""
    for _ in range(tries - 1):
        try:
            return {key: value.value for key, value in stack.outputs().items()}
        except KeyError:
            time.sleep(1.0)
    return {key: value.value for key, value in stack.outputs().items()}


def start_cluster_rig(rig: ExitStack, state: Path) -> ClusterRig:
    """Steps 1 to 3 and the instance image, each printed with its time; `rig` stops what they started."""
    plane, node = _cluster(rig, state)
    stack, feed = _stack(rig, state, plane, node)
    with step("the instance image (Debian's sshd, 16 MB) into the node"):
        image = load_instance_image(node, state)
    keys = ensure_client_keypair(state / "id_ed25519", comment=_KEY_COMMENT)
    return ClusterRig(state, plane, node, stack, feed, image, keys)


def _demo(rig: ExitStack, state: Path) -> None:
    cluster = start_cluster_rig(rig, state)
    with step(f"a GPU user's pod {NAMESPACE}/{INSTANCE}: the image's sshd, the user's key in a ConfigMap"):
        cluster.create_pod(INSTANCE)
    with step("the reconciler's up: the pod's endpoint in the status ConfigMap"):
        say(f"    {_wait('the endpoint', lambda: cluster.endpoint(INSTANCE), 300)}")
    with step("Traefik on the stack's entry points, its router from Pangolin's HTTP provider"):
        cluster.start_traefik(rig, routers=1)
    with step("the pod Ready: its sshd serves the host key and certificate of its Secret"):
        _wait("the pod Ready", lambda: pod_ready(cluster.pod(INSTANCE)), 180)
    with step(f"ssh ssh-{INSTANCE} (StrictHostKeyChecking yes; known_hosts: the stack's @cert-authority line only)"):
        say(f"    {_wait('ssh into the pod', lambda: cluster.ssh(INSTANCE), 30)}")


def run_cluster_demo(state: Path | None = None) -> int:
    state = state or REPO / ".pulumi-state" / "demo-cluster"
    shutil.rmtree(state, ignore_errors=True)
    state.mkdir(parents=True)
    started = time.monotonic()
    with ExitStack() as rig:
        try:
            _demo(rig, state)
        except (TimeoutError, auto.CommandError, RuntimeError) as exc:
            say(f"!!! {exc}")
            say(f"!!! demo-cluster failed after {time.monotonic() - started:.1f}s")
            return ExitCode.FAILED
        say(f"==> demo-cluster OK: ssh reached the pod's sshd through the gateway ({time.monotonic() - started:.1f}s)")
        say("==> stopping what it started")
    return ExitCode.OK
