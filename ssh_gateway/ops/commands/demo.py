"""`ssh-gateway demo`: the main job on this machine, ssh_gateway/ops/tools/main_job.py (`run_demo`)."""

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
    from ssh_gateway.ops.tools.main_job import run_demo

    return run_demo(args.action, stack=str(args.stack), state_dir=args.state_dir, keep=bool(args.keep))


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", nargs="?", choices=("up", "down"), default="up", help="default: %(default)s")
    parser.add_argument("--keep", action="store_true", help="leave the emulator and sshd running")
    parser.add_argument("--stack", default="local", help="a stack of static loopback targets (default: %(default)s)")
    parser.add_argument("--state-dir", type=Path, help="keys, logs, pid files (default: .pulumi-state/demo)")


COMMAND: Final = Command(
    name="demo",
    summary="the main job on this machine: real ssh through ports the program allocated",
    description="Starts the Pangolin emulator with its data plane and a local sshd, runs `pulumi up` on the "
    "local stack, then the real ssh client through every instance's public port; prints the answers, the "
    "endpoints and the generated ssh config, and stops what it started. scripts/demo bootstraps first.",
    examples=[
        "ssh-gateway demo",
        "ssh-gateway demo --keep      # leave them running, e.g. for the doctor",
        "ssh-gateway demo down       # destroy the stack, stop what --keep left",
    ],
    codes={
        ExitCode.OK: "every instance answered through its public port",
        ExitCode.FAILED: "an instance did not answer (the doctor's verdict is printed) or a step failed",
        ExitCode.CANNOT_RUN: "bad arguments, or no toolchain (run scripts/bootstrap venv cli)",
    },
    run=_run,
    arguments=_arguments,
)
