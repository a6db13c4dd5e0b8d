"""`ssh-gateway recover`: ssh_gateway/ops/recovery/ (`run_recover`)."""

from __future__ import annotations

import argparse
from typing import Final

from ssh_gateway.ops.command import Command
from ssh_gateway.ops.exit_codes import ExitCode

__all__ = ["COMMAND"]


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--stack", required=True, help="the stack whose `pulumi up` was interrupted")
    parser.add_argument("--json", action="store_true", help="print the report as one JSON object")
    parser.add_argument(
        "--ambient",
        action="store_true",
        help="the pulumi on PATH with the environment's backend (PULUMI_BACKEND_URL, AZURE_STORAGE_*) and secrets, "
        "not the offline toolchain's file backend",
    )
    parser.add_argument(
        "--gone-host",
        action="append",
        default=[],
        metavar="HOST",
        help="a host known to be gone (a deleted pod): its locks are stale and removed; repeat it for several",
    )


def _run(args: argparse.Namespace) -> int:
    from ssh_gateway.ops.recovery.repair import run_recover

    gone = frozenset(str(h) for h in args.gone_host)
    return run_recover(str(args.stack), ambient=bool(args.ambient), gone_hosts=gone, json_output=bool(args.json))


COMMAND: Final = Command(
    name="recover",
    summary="make a stack whose `pulumi up` was killed usable again",
    description="Make a stack whose `pulumi up` was killed usable again: remove its lock if the lock's process is "
    "gone (never while it runs), repair an empty .attrs file or a truncated checkpoint, adopt each pending Pangolin "
    "create that Pangolin made (or confirm it absent), clear the pending operations, import the Services, "
    "Secrets and NSG rules of this stack that exist but that no state holds, and say what was done.",
    examples=(
        "ssh-gateway recover --stack dev",
        "ssh-gateway recover --stack dev --json",
        "ssh-gateway recover --ambient --stack prod-a   # a shared backend (PULUMI_BACKEND_URL=azblob://...)",
    ),
    codes={
        ExitCode.OK: "the stack is usable: every step succeeded, or there was nothing to do",
        ExitCode.FAILED: "a step failed (Pangolin unreachable, a pulumi command failed, a broken checkpoint without "
        "a sound .bak)",
        ExitCode.CANNOT_RUN: "cannot run: bad arguments, no toolchain, no such stack, no API key",
        ExitCode.REFUSED: "refused, nothing changed: the stack's lock is held by a live process, or by one on another "
        "host",
    },
    run=_run,
    arguments=_arguments,
)
