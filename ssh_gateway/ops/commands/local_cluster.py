"""`ssh-gateway local-cluster`: ssh_gateway/local/local_cluster.py (`run`)."""

from __future__ import annotations

import argparse
from typing import Final

from ssh_gateway.ops.command import Command
from ssh_gateway.ops.exit_codes import ExitCode

__all__ = ["COMMAND", "start_stop_status"]


def start_stop_status(parser: argparse.ArgumentParser) -> None:
    """The one argument of a local service's command."""
    parser.add_argument("command", choices=("start", "stop", "status"))


def _run(args: argparse.Namespace) -> int:
    from ssh_gateway.local.local_cluster import run

    return run(args.command)


COMMAND: Final = Command(
    name="local-cluster",
    summary="a local etcd + kube-apiserver for the local stack's Kubernetes half",
    description="etcd + kube-apiserver (built by scripts/bootstrap control-plane) on 127.0.0.1:16443, no "
    "controllers; state, certificates, kubeconfig and logs under .pulumi-state/local-cluster/ "
    "(docs/local-cluster.md). `status` exits 3 when it is not running.",
    examples=[
        "ssh-gateway local-cluster start",
        "ssh-gateway local-cluster status",
        "ssh-gateway local-cluster stop",
    ],
    codes={
        ExitCode.OK: "started, stopped, or running and ready",
        ExitCode.FAILED: "it failed to start, or it runs but is not ready",
        ExitCode.REFUSED: "(status) it is not running",
    },
    run=_run,
    arguments=start_stop_status,
)
