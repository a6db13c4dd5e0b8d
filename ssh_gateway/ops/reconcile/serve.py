"""`ssh-gateway reconcile` (ssh_gateway/ops/commands/reconcile.py): the stacks' targets read, the reconciler run
until SIGTERM or SIGINT (or one pass each), its exit code."""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Sequence

from ssh_gateway.core.addresses import ListenAddress
from ssh_gateway.core.log_events import json_log
from ssh_gateway.kube import KubeError
from ssh_gateway.ops.exit_codes import ExitCode

from .endpoint import EndpointError
from .reconciler import TargetError, reconcile, stack_target
from .step_processes import PARALLEL_STEPS, subprocess_steps

__all__ = ["serve"]


def serve(
    stacks: Sequence[str],
    *,
    once: bool = False,
    ambient: bool = False,
    skip_preview: bool = False,
    parallel: int = PARALLEL_STEPS,
    identity: str | None = None,
    resync: float | None = None,
    metrics_address: ListenAddress | None = None,
) -> int:
    """Follows `stacks` (each once, in order): REFUSED when one cannot be followed, CANNOT_RUN when the cluster
    cannot be reached or `metrics_address` cannot be listened on, else the reconciler's own code."""
    try:
        targets = [stack_target(stack) for stack in dict.fromkeys(stacks)]
    except TargetError as exc:
        print(f"reconcile: {exc}", file=sys.stderr)
        return ExitCode.REFUSED
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        # The running `up`s finish (a pod's terminationGracePeriodSeconds gives them the time); no new one starts.
        signal.signal(signum, lambda *_: stop.set())
    timing = {"resync": resync} if resync else {}
    try:
        return reconcile(
            targets,
            run_step=subprocess_steps(ambient=ambient, skip_preview=skip_preview, parallel=parallel),
            log=json_log(),
            stop=stop,
            once=once,
            identity=identity,
            metrics_address=metrics_address,
            **timing,
        )
    except (KubeError, EndpointError) as exc:
        print(f"reconcile: {exc}", file=sys.stderr)
        return ExitCode.CANNOT_RUN
