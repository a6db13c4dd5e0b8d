"""The real node's network on this machine: a bridge for its pods and a loopback address for its NodePorts.

Pods get addresses from `POD_NETWORK` on the bridge `BRIDGE`, each in a network namespace the CNI plugins make;
the bridge's own address (`NODE_ADDRESS`) is the node's, since the kubelet refuses a loopback one. kube-proxy
serves NodePorts on `NODE_PORT_ADDRESS` only, an address of `lo` added here: the other tests' stand-in sshds
listen on 127.0.0.1:<nodePort>, and a NodePort rule on every local address would redirect them. So all traffic
stays on loopback or goes into network namespaces made here.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from ipaddress import IPv4Interface, IPv4Network
from pathlib import Path

from ssh_gateway.local.control_plane import SERVICE_CLUSTER_IP_RANGE

__all__ = ["NODE_ADDRESS", "NODE_PORT_ADDRESS", "POD_NETWORK", "NodeNetwork", "cni_config"]

BRIDGE = "sshgw0"
POD_NETWORK = IPv4Network("10.245.0.0/24")
"""Apart from kwok's simulated pods (10.244.0.0/16) and the Services (10.96.0.0/16)."""
NODE_ADDRESS = IPv4Interface("10.245.0.1/24")
"""The bridge's address: the node's InternalIP and the pods' gateway."""
NODE_PORT_ADDRESS = "127.0.0.2"
"""Where kube-proxy serves NodePorts (a stack's `kubernetes.nodeIp` for this node)."""


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check)  # noqa: S603, S607


def cni_config(ipam_dir: Path) -> str:
    """The CNI network list containerd gives each pod: a veth on `BRIDGE`, an address from `POD_NETWORK`, and a
    route to the Services through the node (kube-proxy's rules there turn a ClusterIP into an endpoint). No default
    route: a pod reaches the node, the other pods and the Services, nothing beyond this machine."""
    bridge = {
        "type": "bridge",
        "bridge": BRIDGE,
        "isGateway": True,
        "hairpinMode": True,
        "ipam": {
            "type": "host-local",
            "ranges": [[{"subnet": str(POD_NETWORK)}]],
            "routes": [{"dst": SERVICE_CLUSTER_IP_RANGE}],
            "dataDir": str(ipam_dir),
        },
    }
    return json.dumps({"cniVersion": "0.4.0", "name": "ssh-gateway-node", "plugins": [bridge]}, indent=2)


_ROUTE_LOCALNET = Path("/proc/sys/net/ipv4/conf/all/route_localnet")
"""kube-proxy turns it on to route NodePorts on a loopback address to pods."""


@dataclass
class NodeNetwork:
    """The bridge and the NodePort address, made by `up` and removed by `down` (only what `up` added), and
    route_localnet as it was."""

    added_bridge: bool = False
    added_address: bool = False
    route_localnet: str = ""

    def up(self) -> None:
        self.route_localnet = _ROUTE_LOCALNET.read_text().strip()
        if _ip("link", "show", BRIDGE, check=False).returncode != 0:
            _ip("link", "add", BRIDGE, "type", "bridge")
            self.added_bridge = True
        if str(NODE_ADDRESS) not in _ip("-4", "addr", "show", "dev", BRIDGE).stdout:
            _ip("addr", "add", str(NODE_ADDRESS), "dev", BRIDGE)
        _ip("link", "set", BRIDGE, "up")
        if f"inet {NODE_PORT_ADDRESS}/32 " not in _ip("-4", "addr", "show", "dev", "lo").stdout:
            _ip("addr", "add", f"{NODE_PORT_ADDRESS}/32", "dev", "lo")
            self.added_address = True

    def down(self) -> None:
        if self.route_localnet:
            _ROUTE_LOCALNET.write_text(self.route_localnet)
        if self.added_address:
            _ip("addr", "del", f"{NODE_PORT_ADDRESS}/32", "dev", "lo", check=False)
        if self.added_bridge:
            _ip("link", "del", BRIDGE, check=False)
