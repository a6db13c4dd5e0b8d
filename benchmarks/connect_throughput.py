"""Throughput of the CONNECT path against plain ssh, on one machine.

A real sshd on loopback; the same 20 MB download (`head -c ... /dev/zero` on the server, read by the client)
through plain `ssh -p <sshd>` and through `ProxyCommand proxytunnel` → Envoy configured as an Istio gateway
with the project's EnvoyFilters (ssh_gateway/local/envoy.py). Each figure is the median of 3 interleaved runs;
a 1-byte run of each path gives its login alone. Prints both paths and the ratio CONNECT / direct.
Run: .venv/bin/python benchmarks/connect_throughput.py [--megabytes 20] [--runs 3]
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from ssh_gateway.core.connect import ConnectGateway, ConnectInstance, connect_cluster, connect_manifests
from ssh_gateway.core.host_identity import openssh_public_key
from ssh_gateway.local.envoy import EnvoyGateway
from ssh_gateway.local.sshd import ClientKey, LocalSshd, ensure_client_keypair, login_user
from ssh_gateway.plumbing.loopback import free_port

SELECTOR = {"istio": "ingressgateway"}


def ssh_argv(key: ClientKey, known_hosts: Path, *options: str) -> list[str]:
    ssh = shutil.which("ssh")
    if ssh is None:
        raise SystemExit("ssh is not installed: run scripts/system-packages")
    return [
        ssh,
        "-F",
        "/dev/null",
        "-i",
        str(key.private),
        "-o",
        "IdentitiesOnly=yes",
        "-o",
        "BatchMode=yes",
        "-o",
        "StrictHostKeyChecking=yes",
        "-o",
        f"UserKnownHostsFile={known_hosts}",
        "-o",
        "HostKeyAlias=bench",
        "-l",
        login_user(),
        *options,
    ]


def timed_download(argv: list[str], size: int) -> float:
    start = time.perf_counter()
    result = subprocess.run([*argv, f"head -c {size} /dev/zero"], capture_output=True, timeout=300, check=False)  # noqa: S603
    took = time.perf_counter() - start
    if result.returncode != 0 or len(result.stdout) != size:
        raise SystemExit(f"transfer failed ({result.returncode}, {len(result.stdout)} bytes): {result.stderr!r}")
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=int, default=20)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    size = args.megabytes * 1024 * 1024
    proxytunnel = shutil.which("proxytunnel")
    if proxytunnel is None:
        raise SystemExit("proxytunnel is not installed: run scripts/system-packages")

    with tempfile.TemporaryDirectory(prefix="connect-bench-") as tmp:
        root = Path(tmp)
        key = ensure_client_keypair(root / "id_ed25519", "connect-bench")
        seed = hashlib.sha256(b"connect throughput benchmark sshd").digest()
        sshd = LocalSshd(root / "sshd", port=free_port(), authorized_keys=[key.public_key], host_key_seed=seed)
        known_hosts = root / "known_hosts"
        known_hosts.write_text(f"bench {openssh_public_key(seed)}\n")
        instance = ConnectInstance("bench", "dev")
        port = free_port()
        gateway = EnvoyGateway(
            root / "envoy",
            port=port,
            clusters={connect_cluster(instance.authority): sshd.port},
            filters=connect_manifests(ConnectGateway(SELECTOR, port), [instance]),
            selector=SELECTOR,
        )
        sshd.start()
        try:
            with gateway:
                direct = ssh_argv(key, known_hosts, "-p", str(sshd.port), "127.0.0.1")
                proxy = f"ProxyCommand={proxytunnel} -q -p 127.0.0.1:{port} -d %h:%p"
                connect = ssh_argv(key, known_hosts, "-o", proxy, "-p", "22", instance.authority)
                timed_download(direct, 1024)  # warm up both paths (page cache, first exec)
                timed_download(connect, 1024)
                # Interleaved, so a load change on a shared machine hits both paths alike; 1 byte = the login.
                runs = [
                    (
                        timed_download(direct, 1),
                        timed_download(connect, 1),
                        timed_download(direct, size),
                        timed_download(connect, size),
                    )
                    for _ in range(args.runs)
                ]
        finally:
            sshd.stop()
    direct_login, connect_login, direct_s, connect_s = (statistics.median(r[i] for r in runs) for i in range(4))
    mb = size / 1e6
    print(f"{args.megabytes} MiB download, median of {args.runs} interleaved runs:")
    print(f"  direct ssh:             {direct_s:6.3f} s  ({mb / direct_s:7.1f} MB/s), login alone {direct_login:.3f} s")
    print(
        f"  CONNECT through Envoy:  {connect_s:6.3f} s  ({mb / connect_s:7.1f} MB/s), login alone {connect_login:.3f} s"
    )
    print(f"  ratio CONNECT / direct: {connect_s / direct_s:.2f}x the time, login included")
    direct_net, connect_net = direct_s - direct_login, connect_s - connect_login
    print(
        f"  transfer alone:         direct {mb / direct_net:.1f} MB/s, CONNECT {mb / connect_net:.1f} MB/s "
        f"(ratio {connect_net / direct_net:.2f}x the time)"
    )


if __name__ == "__main__":
    main()
