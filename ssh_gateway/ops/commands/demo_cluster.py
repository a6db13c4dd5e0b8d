"""`ssh-gateway demo-cluster`: Seed A's flow on this machine, ssh_gateway/ops/tools/cluster_demo.py."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Final

from ssh_gateway.ops.command import Command
from ssh_gateway.ops.exit_codes import ExitCode
from ssh_gateway.plumbing.toolchain import require_pulumi

__all__ = ["COMMAND"]


def _run(args: argparse.Namespace) -> int:
    require_pulumi()
    from ssh_gateway.ops.tools.cluster_demo import run_cluster_demo

    return run_cluster_demo(args.state_dir)


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--state-dir", type=Path, help="keys, logs, the cluster's data (default: .pulumi-state/demo-cluster)"
    )


COMMAND: Final = Command(
    name="demo-cluster",
    summary="Seed A's flow on this machine: a cluster, the reconciler deployed, a pod, and ssh into it",
    description="Starts the cluster that acts with one real node (containerd, kubelet, kube-proxy), the Pangolin "
    "emulator and Azurite; installs the reconciler as docs/reconciler.md says (two replicas); creates a user's pod "
    "running the instance image's sshd; waits for its endpoint, starts Traefik on the stack's entry points and "
    "logs in with ssh, trusting only the stack's @cert-authority line. Prints each step and its time, then stops "
    "and removes everything. Needs root. scripts/demo-cluster bootstraps first.",
    examples=["ssh-gateway demo-cluster", "scripts/demo-cluster      # bootstrap and system packages first"],
    codes={
        ExitCode.OK: "ssh reached the pod's sshd through the gateway",
        ExitCode.FAILED: "a step failed or timed out (the line before says which)",
        ExitCode.CANNOT_RUN: "no toolchain (run scripts/bootstrap), or not root",
    },
    run=_run,
    arguments=_arguments,
)
