"""A real node for the tests' cluster: containerd runs its pods, the pinned Kubernetes module's kubelet manages
them and its kube-proxy routes their Services' NodePorts.

Beside kwok's simulated nodes (cluster_nodes.py), pods here really run: the instance image's sshd serving its
mounted host-key Secret, reached through its Service's NodePort (node_network.py: where the pods and the NodePorts
live). The node is tainted `TAINT`, so only pods that tolerate it land here.

Its three processes are `ManagedProcess`es of the rig, started in order, each once the one before is ready, and
killed with the process that started them. The state lives under one fixed directory, so a start after a killed
run first clears what that run left (containerd finds its old containers again, and they are killed).

Needs root, Debian's containerd, runc, CNI plugins, iptables and conntrack (scripts/system-packages), and
bootstrap's kubelet, kube-proxy and pause. This machine's cgroups are v1: kubelet 1.35+ refuses them unless
`failCgroupV1: false`, and lowering a process's OOM score is not allowed here, so containerd keeps its sandboxes'
scores no lower than its own (`restrict_oom_score_adj`).
"""

from __future__ import annotations

import fcntl
import shlex
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import yaml

from ssh_gateway.local.cluster_nodes import wait_nodes_ready
from ssh_gateway.local.control_plane import ControlPlane
from ssh_gateway.local.node_images import K8S_NAMESPACE, PAUSE_IMAGE, import_image, pause_archive
from ssh_gateway.local.node_network import NODE_ADDRESS, NODE_PORT_ADDRESS, POD_NETWORK, NodeNetwork, cni_config
from ssh_gateway.local.node_relay import point_kubernetes_service, start_relay, unpoint_kubernetes_service
from ssh_gateway.plumbing.loopback import free_ports
from ssh_gateway.plumbing.process import ManagedProcess, ProcessError, ProcessSpec, http_ready, path_ready
from ssh_gateway.plumbing.toolchain import toolchain_binary

__all__ = ["TAINT", "KubeletNode", "KubeletNodeError", "start_kubelet_node"]

NODE_ROOT = Path("/var/lib/ssh-gateway/node")
TAINT = {"key": "ssh-gateway.dev/real-node", "value": "true", "effect": "NoSchedule"}
_STOP_SECONDS = 30.0
"""How long the kubelet gets to stop the node's pods before what is left is killed through containerd."""


class KubeletNodeError(ProcessError):
    """A process of the real node did not start, or the node did not turn Ready (the message says which)."""


@dataclass
class KubeletNode:
    """A running real node; `stop` takes down its pods, processes, iptables rules and network."""

    name: str
    root: Path
    plane: ControlPlane
    network: NodeNetwork
    lock: IO[bytes]
    """Held while the node runs: one node per machine (the bridge, the address and the root are fixed)."""
    processes: list[ManagedProcess] = field(default_factory=list)
    relays: list[ManagedProcess] = field(default_factory=list)
    """`expose`'s, one per port."""

    @property
    def socket(self) -> Path:
        return self.root / "containerd.sock"

    @property
    def node_port_address(self) -> str:
        """Where its Services' NodePorts answer: the stack's `kubernetes.nodeIp`."""
        return NODE_PORT_ADDRESS

    def load_image(self, archive: Path) -> None:
        import_image(self.socket, archive)

    def logs(self, namespace: str, pod: str) -> str:
        """A pod's container logs as the kubelet wrote them (CRI format, one line each). Read from its files: the
        API server does not reach this kubelet (127.0.0.1, no client certificate), so `kubectl logs` fails here."""
        files = sorted(Path("/var/log/pods").glob(f"{namespace}_{pod}_*/*/*.log"))
        return "".join(f.read_text(errors="replace") for f in files)

    def kill_pod(self, namespace: str, pod: str) -> None:
        """Every container of the pod (its sandbox too) killed with SIGKILL, as a lost node or an OOM kill leaves
        it: no SIGTERM, no grace period."""
        labels = f'labels."io.kubernetes.pod.namespace"=={namespace},labels."io.kubernetes.pod.name"=={pod}'
        for container in _ctr(self.socket, "containers", "ls", "--quiet", labels).stdout.split():
            _ctr(self.socket, "tasks", "kill", "--signal", "SIGKILL", container)

    def expose(self, port: int) -> str:
        """What the host serves on 127.0.0.1:`port` (the Pangolin emulator, Azurite), reachable from the pods at
        the returned `host:port`, the node's address (node_relay.py). Stopped with the node."""
        self.relays.append(start_relay(self.root, port, KubeletNodeError))
        return f"{NODE_ADDRESS.ip}:{port}"

    def stop(self) -> None:
        """The pods first (the kubelet unmounts their volumes and takes down their network), then the rest."""
        try:
            if len(self.processes) == 3:
                self._delete_pods()
        finally:
            for process in reversed(self.processes[1:]):
                process.stop()
            if self.processes:
                _kill_containers(self.socket)
                self.processes[0].stop()
            _remove_kube_rules()
            _unmount_under(self.root)
            for relay in self.relays:
                relay.stop()
            with self.plane.client() as api:
                api.delete(f"/api/v1/nodes/{self.name}")
                unpoint_kubernetes_service(api)
            self.network.down()
            self.lock.close()

    def _delete_pods(self) -> None:
        deadline = time.monotonic() + _STOP_SECONDS
        with self.plane.client() as api:
            for pod in _pods_on(api, self.name):
                meta = pod["metadata"]
                api.delete(f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}?gracePeriodSeconds=0")
        while _containers(self.socket) and time.monotonic() < deadline:
            time.sleep(0.5)


def start_kubelet_node(
    plane: ControlPlane, *, name: str = "real-node-0", root: Path = NODE_ROOT, timeout: float = 120.0
) -> KubeletNode:
    """Starts containerd, the kubelet and kube-proxy for `plane` and returns once the node is Ready and kube-proxy
    healthy. On any failure what was started is stopped again."""
    root.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    lock = _take_the_machine(root, timeout)
    node = KubeletNode(name=name, root=root, plane=plane, network=NodeNetwork(), lock=lock)
    try:
        node.network.up()
        node.expose(plane.api_port)  # the pods' in-cluster config dials the `kubernetes` Service: the API server
        with plane.client() as api:
            point_kubernetes_service(api, plane.api_port)
        kubelet_port, kubelet_health, proxy_health, proxy_metrics = free_ports(4)
        node.socket.unlink(missing_ok=True)  # a killed run's: it would look ready before containerd listens
        containerd = _start(node, _containerd_spec(root), path_ready(node.socket), started + timeout)
        _kill_containers(node.socket)  # a killed run's pods, found again by containerd
        _unmount_under(root / "kubelet")
        import_image(node.socket, pause_archive(root))
        kubelet = _kubelet_spec(node, kubelet_port, kubelet_health)
        _start(node, kubelet, http_ready(f"http://127.0.0.1:{kubelet_health}/healthz"), started + timeout, containerd)
        with plane.client() as api:
            wait_nodes_ready(api, [name], max(started + timeout - time.monotonic(), 1.0))
        proxy = _kube_proxy_spec(node, proxy_health, proxy_metrics)
        _start(node, proxy, http_ready(f"http://127.0.0.1:{proxy_health}/healthz"), started + timeout)
    except TimeoutError as exc:
        node.stop()
        log = root / "kubelet.log"
        raise KubeletNodeError(f"the real node did not turn Ready: {exc} (the kubelet's log: {log})") from None
    except BaseException:
        node.stop()
        raise
    return node


def _take_the_machine(root: Path, timeout: float) -> IO[bytes]:
    """An exclusive lock on the node's root, waited for while another process (another test session) runs a node."""
    lock = (root / "lock").open("wb")
    deadline = time.monotonic() + timeout
    while True:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return lock
        except BlockingIOError:
            if time.monotonic() > deadline:
                lock.close()
                message = f"another process has run the real node ({root}) for more than {timeout:g}s"
                raise KubeletNodeError(message) from None
            time.sleep(1.0)


def _start(node: KubeletNode, spec: ProcessSpec, ready: Any, deadline: float, *needs: ManagedProcess) -> ManagedProcess:
    process = ManagedProcess(spec)
    process.start(ready=ready, timeout=max(deadline - time.monotonic(), 1.0), needs=needs)
    node.processes.append(process)
    return process


def _spec(name: str, argv: list[str], root: Path) -> ProcessSpec:
    return ProcessSpec(
        name=name,
        argv=tuple(argv),
        log=root / f"{name}.log",
        stop_grace=10.0,
        death_signal=signal.SIGKILL,
        error=KubeletNodeError,
    )


def _containerd_spec(root: Path) -> ProcessSpec:
    (root / "cni").mkdir(exist_ok=True)
    (root / "cni" / "10-bridge.conflist").write_text(cni_config(root / "cni-ipam"))
    config = root / "containerd.toml"
    config.write_text(
        f"""version = 2
root = "{root / "containerd"}"
state = "{root / "containerd-state"}"
[grpc]
  address = "{root / "containerd.sock"}"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{PAUSE_IMAGE}"
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{root / "cni"}"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
"""
    )
    return _spec("containerd", ["containerd", f"--config={config}"], root)


def _kubelet_spec(node: KubeletNode, port: int, health: int) -> ProcessSpec:
    config: dict[str, Any] = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "failCgroupV1": False,
        "cgroupDriver": "cgroupfs",
        "containerRuntimeEndpoint": f"unix://{node.socket}",
        "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": False}},
        "authorization": {"mode": "AlwaysAllow"},
        "address": "127.0.0.1",
        "port": port,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": health,
        "registerWithTaints": [TAINT],
        "resolvConf": "",  # no cluster DNS here
        # The images were imported, not pulled: nothing may collect them.
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%"},
    }
    path = node.root / "kubelet.yaml"
    path.write_text(yaml.safe_dump(config))
    argv = [
        str(toolchain_binary("SSH_GATEWAY_KUBELET")),
        f"--config={path}",
        f"--kubeconfig={node.plane.kubeconfig}",
        f"--hostname-override={node.name}",
        f"--node-ip={NODE_ADDRESS.ip}",
        f"--root-dir={node.root / 'kubelet'}",
        f"--cert-dir={node.root / 'kubelet-pki'}",
    ]
    return _spec("kubelet", argv, node.root)


def _kube_proxy_spec(node: KubeletNode, health: int, metrics: int) -> ProcessSpec:
    config = {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": str(node.plane.kubeconfig)},
        "hostnameOverride": node.name,
        "mode": "iptables",
        "clusterCIDR": str(POD_NETWORK),
        "nodePortAddresses": [f"{NODE_PORT_ADDRESS}/32"],
        "conntrack": {"maxPerCore": 0},  # leave the machine's conntrack table size alone
        "healthzBindAddress": f"127.0.0.1:{health}",
        "metricsBindAddress": f"127.0.0.1:{metrics}",
    }
    path = node.root / "kube-proxy.yaml"
    path.write_text(yaml.safe_dump(config))
    return _spec("kube-proxy", [str(toolchain_binary("SSH_GATEWAY_KUBE_PROXY")), f"--config={path}"], node.root)


def _pods_on(api: Any, node: str) -> list[dict[str, Any]]:
    response = api.get("/api/v1/pods", params={"fieldSelector": f"spec.nodeName={node}"})
    response.raise_for_status()
    items: list[dict[str, Any]] = response.json()["items"]
    return items


def _ctr(socket: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return _run(["ctr", "--address", str(socket), "--namespace", K8S_NAMESPACE, *args])


def _containers(socket: Path) -> list[str]:
    return _ctr(socket, "tasks", "ls", "--quiet").stdout.split() if socket.exists() else []


def _kill_containers(socket: Path) -> None:
    """Every container containerd still runs, killed and removed (what the kubelet did not stop)."""
    for task in _containers(socket):
        _ctr(socket, "tasks", "kill", "--signal", "SIGKILL", task)
        _ctr(socket, "tasks", "delete", "--force", task)
    for container in _ctr(socket, "containers", "ls", "--quiet").stdout.split() if socket.exists() else []:
        _ctr(socket, "containers", "delete", container)


def _remove_kube_rules() -> None:
    """Every KUBE-* chain the kubelet and kube-proxy made, and the rules that jump to them: they outlive both, and
    would go on redirecting NodePorts and dropping traffic to 127.0.0.0/8 that does not come from it."""
    for command in ("iptables", "ip6tables"):
        for table in ("filter", "nat", "mangle"):
            dump = _run([f"{command}-save", "-t", table]).stdout.splitlines()
            for line in dump:
                words = shlex.split(line)
                if words[:1] == ["-A"] and not words[1].startswith("KUBE-") and "-j" in words:
                    if words[words.index("-j") + 1].startswith("KUBE-"):
                        _run([command, "-t", table, "-D", *words[1:]])
            chains = [line[1:].split()[0] for line in dump if line.startswith(":KUBE-")]
            for action in ("-F", "-X"):
                for chain in chains:
                    _run([command, "-t", table, action, chain])


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, check=False)  # noqa: S603


def _unmount_under(path: Path) -> None:
    """The kubelet's volume mounts left under `path` (a killed run's), deepest first."""
    prefix = f"{path.resolve()}/"
    mounts = [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()]
    for mount in sorted((m for m in mounts if m.startswith(prefix)), key=len, reverse=True):
        _run(["umount", "--lazy", mount])
