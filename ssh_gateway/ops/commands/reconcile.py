"""`ssh-gateway reconcile`: ssh_gateway/ops/reconcile/ (`serve`), imported when it runs with the kubernetes
client, so `ssh-gateway --help` stays fast."""

from __future__ import annotations

import argparse
from typing import Final

from ssh_gateway.core.addresses import ListenAddress, parse_listen_address
from ssh_gateway.ops.command import Command
from ssh_gateway.ops.exit_codes import ExitCode
from ssh_gateway.ops.reconcile.step_processes import PARALLEL_STEPS

__all__ = ["COMMAND"]


def _arguments(parser: argparse.ArgumentParser) -> None:
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
        "--parallel",
        type=_at_least_one,
        default=PARALLEL_STEPS,
        metavar="N",
        help=f"at most N stacks' recover or up at once, the others wait their turn (default: {PARALLEL_STEPS}; each "
        "takes up to 0.8 GiB: raise it with the memory limit)",
    )
    parser.add_argument(
        "--resync", type=float, default=None, metavar="SECONDS", help="a pass at least this often (default: 600)"
    )
    parser.add_argument(
        "--metrics-address",
        type=_listen_address,
        metavar="HOST:PORT",
        help="serve /metrics (Prometheus), /healthz and /readyz there, e.g. 0.0.0.0:9090 (default: off)",
    )


def _at_least_one(text: str) -> int:
    try:
        number = int(text)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of at least 1")
    return number


def _listen_address(text: str) -> ListenAddress:
    try:
        return parse_listen_address(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _run(args: argparse.Namespace) -> int:
    from ssh_gateway.ops.reconcile.serve import serve

    return serve(
        [str(s) for s in args.stack],
        once=bool(args.once),
        ambient=bool(args.ambient),
        skip_preview=bool(args.skip_preview),
        parallel=int(args.parallel),
        identity=args.identity,
        resync=float(args.resync) if args.resync else None,
        metrics_address=args.metrics_address,
    )


COMMAND: Final = Command(
    name="reconcile",
    summary="keep stacks in step with the cluster: watch the selected objects, run up on a change",
    description="Watches each stack's selected pods or Services (its ssh-gateway:discovery section) and runs the "
    "stack's `ssh-gateway up` when one that matters is added, deleted or changed: one up per stack at a time, "
    "changes during an up batched into the next, stacks (shards) in parallel (--parallel at once), a resync every "
    "10 minutes and a pass when a grace period ends. A Kubernetes Lease per stack lets two replicas take turns. "
    "Before its first up, and after one that failed, it runs `ssh-gateway recover`. One JSON line per event on "
    "stderr (docs/reconciler.md).",
    examples=(
        "ssh-gateway reconcile --stack dev",
        "ssh-gateway reconcile --ambient --skip-preview --metrics-address :9090 --stack prod-a   # in the Deployment",
        "ssh-gateway reconcile --once --ambient --stack prod-a   # a scheduled CI job",
    ),
    codes={
        ExitCode.OK: "stopped by SIGTERM or SIGINT; with --once: every up succeeded (or another replica's covered it)",
        ExitCode.FAILED: "with --once: an up failed (the worst exit code of the stacks' ups is passed on)",
        ExitCode.CANNOT_RUN: "the cluster cannot be reached with the stack's kubeconfig, or --metrics-address cannot "
        "be listened on",
        ExitCode.REFUSED: "a stack file cannot be read, its settings are invalid, or it has no ssh-gateway:discovery",
        ExitCode.INTERRUPTED: "with --once: stopped (SIGTERM, SIGINT) before a stack's pass ran",
    },
    run=_run,
    arguments=_arguments,
)
