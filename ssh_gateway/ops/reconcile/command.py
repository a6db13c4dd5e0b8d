"""The `reconcile` subcommand: its arguments, exit codes and handler. The handler imports the reconciler (and the
kubernetes client) when it runs, so `ssh-gateway --help` stays fast."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Sequence
from typing import Final

from ssh_gateway.ops.command import Command
from ssh_gateway.ops.exit_codes import ExitCode

__all__ = ["COMMAND", "main"]


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--stack",
        action="append",
        required=True,
        help="a stack with an ssh-gateway:discovery section; repeat it for several (each has its own worker)",
    )
    parser.add_argument("--once", action="store_true", help="one pass for every stack, then exit (a scheduled job)")
    parser.add_argument(
        "--ambient",
        action="store_true",
        help="the pulumi on PATH with the environment's backend and secrets (a pod, CI), not the offline toolchain",
    )
    parser.add_argument(
        "--skip-preview",
        action="store_true",
        help="`pulumi up --skip-preview`: the program runs once per up instead of twice (policy packs still run)",
    )
    parser.add_argument("--identity", help="who holds the stacks' leases (default: $POD_NAME, else host and pid)")
    parser.add_argument(
        "--resync", type=float, default=None, metavar="SECONDS", help="a pass at least this often (default: 600)"
    )


def _run(args: argparse.Namespace) -> int:
    from ssh_gateway.core.log_events import json_log
    from ssh_gateway.kube import KubeError

    from .reconciler import TargetError, reconcile, stack_target, subprocess_steps

    stacks = list(dict.fromkeys(str(s) for s in args.stack))
    try:
        targets = [stack_target(stack) for stack in stacks]
    except TargetError as exc:
        print(f"reconcile: {exc}", file=sys.stderr)
        return ExitCode.REFUSED
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        # The running `up`s finish (a pod's terminationGracePeriodSeconds gives them the time); no new one starts.
        signal.signal(signum, lambda *_: stop.set())
    timing = {"resync": float(args.resync)} if args.resync else {}
    try:
        return reconcile(
            targets,
            run_step=subprocess_steps(ambient=bool(args.ambient), skip_preview=bool(args.skip_preview)),
            log=json_log(),
            stop=stop,
            once=bool(args.once),
            identity=args.identity,
            **timing,
        )
    except KubeError as exc:
        print(f"reconcile: {exc}", file=sys.stderr)
        return ExitCode.CANNOT_RUN


_DESCRIPTION: Final = (
    "Watches each stack's selected pods or Services (its ssh-gateway:discovery section) and runs the stack's "
    "`ssh-gateway up` when one that matters is added, deleted or changed: one up per stack at a time, changes "
    "during an up batched into the next, stacks (shards) in parallel, a resync every 10 minutes and a pass when a "
    "grace period ends. A Kubernetes Lease per stack lets two replicas take turns. Before its first up, and after "
    "one that failed, it runs `ssh-gateway recover`. One JSON line per event on stderr (docs/reconciler.md)."
)
COMMAND: Final = Command(
    name="reconcile",
    summary="keep stacks in step with the cluster: watch the selected objects, run up on a change",
    description=_DESCRIPTION,
    examples=(
        "ssh-gateway reconcile --stack dev",
        "ssh-gateway reconcile --ambient --skip-preview --stack prod-a --stack prod-b   # in the Deployment",
        "ssh-gateway reconcile --once --ambient --stack prod-a   # a scheduled CI job",
    ),
    codes={
        ExitCode.OK: "stopped by SIGTERM or SIGINT; with --once: every up succeeded (or another replica's covered it)",
        ExitCode.FAILED: "with --once: an up failed (the worst exit code of the stacks' ups is passed on)",
        ExitCode.CANNOT_RUN: "the cluster cannot be reached with the stack's kubeconfig",
        ExitCode.REFUSED: "a stack file cannot be read, its settings are invalid, or it has no ssh-gateway:discovery",
        ExitCode.INTERRUPTED: "with --once: stopped (SIGTERM, SIGINT) before a stack's pass ran",
    },
    run=_run,
    arguments=_add_arguments,
)


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m ssh_gateway.ops.reconcile`; returns the exit code."""
    return COMMAND.main(argv, prog="python -m ssh_gateway.ops.reconcile")
