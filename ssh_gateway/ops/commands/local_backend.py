"""`ssh-gateway local-backend`: ssh_gateway/local/azurite.py (`run`)."""

from __future__ import annotations

import argparse
from typing import Final

from ssh_gateway.ops.command import Command
from ssh_gateway.ops.exit_codes import ExitCode

from .local_cluster import start_stop_status

__all__ = ["COMMAND"]


def _run(args: argparse.Namespace) -> int:
    from ssh_gateway.local.azurite import run

    return run(args.command)


COMMAND: Final = Command(
    name="local-backend",
    summary="a local Azure Blob state backend (Azurite) for the stacks, shared as a team shares one",
    description="azurite-blob (scripts/bootstrap azurite) on 127.0.0.1:10000 with the container pulumi-state, "
    "data and log under .pulumi-state/local-backend/; prints the AZURE_STORAGE_ACCOUNT, AZURE_STORAGE_KEY "
    "(the emulator's published dev account) and PULUMI_BACKEND_URL to export (docs/shared-backends.md). "
    "`status` exits 3 when it is not running.",
    examples=[
        "ssh-gateway local-backend start",
        "ssh-gateway local-backend status",
        "ssh-gateway local-backend stop",
    ],
    codes={
        ExitCode.OK: "started, stopped, or running with its container",
        ExitCode.FAILED: "it failed to start, or it runs without its container",
        ExitCode.REFUSED: "(status) it is not running",
    },
    run=_run,
    arguments=start_stop_status,
)
