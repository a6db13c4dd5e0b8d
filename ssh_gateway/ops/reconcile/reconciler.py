"""The reconciler's parts put together for a set of stacks: each stack's selection read from its stack file, its
API client, Lease, watch and worker; all of them running until stopped, or one pass each (`--once`)."""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import urllib3
import yaml
from kubernetes.client import ApiClient, CoreV1Api
from kubernetes.client.exceptions import ApiException

from ssh_gateway.core.addresses import ListenAddress, check_dns_name
from ssh_gateway.core.log_events import Log, LogEvent
from ssh_gateway.core.names import DiscoverFrom, reconcile_lease_name, stack_label, status_config_map_name
from ssh_gateway.core.settings import SettingsError, read_stack_file
from ssh_gateway.kube import api_client
from ssh_gateway.ops.exit_codes import ExitCode
from ssh_gateway.ops.shared.automation import stack_file
from ssh_gateway.plumbing.toolchain import REPO

from .after_pass import StatusFollower
from .endpoint import MetricsEndpoint
from .events import EventRecorder
from .health import Health
from .lease import StackLease
from .metrics import ReconcilerMetrics
from .signals import StackSignals
from .watch import StackWatch
from .worker import RunStep, StackWorker

__all__ = ["TargetError", "reconcile", "stack_target"]


_NOT_FOUND: Final = 404


class TargetError(ValueError):
    """A stack the reconciler cannot follow (no stack file, invalid settings, no `ssh-gateway:discovery`)."""


@dataclass(frozen=True, kw_only=True)
class StackTarget:
    """What the reconciler needs of a stack: what to watch, and where its lease and status live."""

    stack: str
    project: str
    kind: DiscoverFrom
    namespaces: tuple[str, ...]
    selector: Mapping[str, str]
    grace_period: int
    status_namespace: str
    """Where the stack's status ConfigMap and its Lease are."""
    kubeconfig: str | None
    context: str | None


def stack_target(stack: str, work_dir: Path = REPO) -> StackTarget:
    """The stack's selection, from its stack file, read by the program's own reader (`read_stack_file`)."""
    path = stack_file(stack, work_dir)
    try:
        text = path.read_text()
    except OSError as exc:
        raise TargetError(f"stack {stack}: cannot read {path}: {exc.strerror}") from None
    try:
        settings = read_stack_file(text)
    except SettingsError as exc:
        raise TargetError(f"stack {stack}: {exc}") from None
    discovery = settings.discovery
    if discovery is None:
        raise TargetError(
            f"stack {stack}: {path.name} has no ssh-gateway:discovery section, so there is nothing to watch "
            "(docs/cluster-instances.md)"
        )
    try:  # the Lease is named after the stack, and an object's name is a DNS name
        check_dns_name(reconcile_lease_name(stack), what="its Lease's name")
    except ValueError as exc:
        raise TargetError(f"stack {stack}: {exc}; a stack to reconcile has a lowercase name") from None
    project = str(yaml.safe_load((work_dir / "Pulumi.yaml").read_text())["name"])
    return StackTarget(
        stack=stack,
        project=project,
        kind=discovery.from_,
        namespaces=tuple(discovery.namespaces),
        selector=dict(discovery.selector),
        grace_period=discovery.grace_period,
        status_namespace=settings.status_namespace,
        kubeconfig=settings.kubernetes.kubeconfig,
        context=settings.kubernetes.context,
    )


def default_identity() -> str:
    """Who holds a lease: the pod's name (the Deployment passes `POD_NAME`), else host and pid."""
    return os.environ.get("POD_NAME") or f"{socket.gethostname()}-{os.getpid()}"


def pod_gone(api: ApiClient, namespace: str | None, name: str) -> bool:
    """Whether the pod `namespace/name` no longer exists: its containers have stopped (the API server removes a pod
    once its kubelet says so), so a stack lock its reconciler left is stale. False when unknown: outside a pod (no
    `POD_NAMESPACE`), or the API server does not answer 404."""
    if not namespace:
        return False
    try:
        CoreV1Api(api).read_namespaced_pod(name, namespace, _request_timeout=(5.0, 15.0))
    except ApiException as exc:
        return bool(exc.status == _NOT_FOUND)
    except (urllib3.exceptions.HTTPError, OSError):
        return False
    return False


@dataclass
class _Stack:
    target: StackTarget
    api: ApiClient
    worker: StackWorker
    follower: StatusFollower


@dataclass(frozen=True)
class _Shared:
    """What every stack of one reconciler shares."""

    run_step: RunStep
    log: Log
    identity: str
    metrics: ReconcilerMetrics
    health: Health
    watched: bool
    """Whether the stacks' objects are watched (not with `--once`): the health rule then follows the watches."""


def _stack(target: StackTarget, shared: _Shared, **timing: float) -> _Stack:
    api = api_client(target.kubeconfig, target.context)
    lease = StackLease(
        api,
        namespace=target.status_namespace,
        name=reconcile_lease_name(target.stack),
        identity=shared.identity,
        stack_label=stack_label(target.project, target.stack),
    )
    signals = StackSignals(
        target.stack,
        metrics=shared.metrics,
        health=shared.health,
        namespaces=target.namespaces if shared.watched else (),
        lease_known=lambda: lease.answered,
    )
    follower = StatusFollower(
        api,
        namespace=target.status_namespace,
        name=status_config_map_name(target.stack),
        grace_period=target.grace_period,
        signals=signals,
        events=EventRecorder(api, stack=target.stack, instance=shared.identity, log=shared.log),
        log=shared.log,
    )
    worker = StackWorker(
        target.stack,
        run_step=shared.run_step,
        lease=lease,
        log=shared.log,
        after_pass=follower.after_pass,
        host_gone=lambda host: pod_gone(api, os.environ.get("POD_NAMESPACE"), host),
        signals=signals,
        **timing,
    )
    return _Stack(target=target, api=api, worker=worker, follower=follower)


def reconcile(
    targets: Sequence[StackTarget],
    *,
    run_step: RunStep,
    log: Log,
    stop: threading.Event,
    once: bool = False,
    identity: str | None = None,
    metrics_address: ListenAddress | None = None,
    **timing: float,
) -> int:
    """Follows `targets` until `stop` is set (0), or with `once` one pass each: the worst `up`'s exit code.
    `metrics_address`: where /metrics, /healthz and /readyz are served (an `EndpointError` when it cannot listen there).
    `timing` goes to each `StackWorker` (debounce, max_delay, resync)."""
    metrics, health = ReconcilerMetrics(), Health()
    endpoint = MetricsEndpoint(metrics_address, metrics, health) if metrics_address is not None else None
    try:
        shared = _Shared(run_step, log, identity or default_identity(), metrics, health, watched=not once)
        stacks = [_stack(t, shared, **timing) for t in targets]
        if endpoint is not None:
            endpoint.start()
        for s in stacks:
            s.follower.baseline()
        if once:
            return _once(stacks, stop)
        return _follow(stacks, shared, stop, None if endpoint is None else str(endpoint.address))
    finally:
        if endpoint is not None:
            endpoint.stop()


def _once(stacks: Sequence[_Stack], stop: threading.Event) -> int:
    """One pass each: the worst `up`'s exit code (INTERRUPTED when stopped before a stack's pass ran)."""
    codes: dict[str, int | None] = {}

    def one(s: _Stack) -> None:
        codes[s.target.stack] = s.worker.run_once(["once"], time.time(), stop)

    _all(stacks, one)
    if stop.is_set() and None in codes.values():
        return ExitCode.INTERRUPTED  # a stack's pass never ran: not a success
    ran = [c for c in codes.values() if c is not None]
    return max(ran, default=0)


def _follow(stacks: Sequence[_Stack], shared: _Shared, stop: threading.Event, served: str | None) -> int:
    """Each stack's watch and worker until `stop` is set."""
    log = shared.log
    watches = [
        StackWatch(
            s.api,
            kind=s.target.kind,
            namespaces=s.target.namespaces,
            selector=s.target.selector,
            notify=s.worker.mark,
            report=_reporter(log, s.target.stack),
            signals=s.worker.signals,
        )
        for s in stacks
    ]
    metrics = {"metrics": served} if served is not None else {}
    log(LogEvent.START, stacks=[s.target.stack for s in stacks], identity=shared.identity, **metrics)
    for watch in watches:
        watch.start()
    try:
        _all(stacks, lambda s: s.worker.run(stop))
    finally:
        for watch in watches:
            watch.stop()
    log(LogEvent.STOP, stacks=[s.target.stack for s in stacks])
    return 0


def _reporter(log: Log, stack: str) -> Callable[[LogEvent, Mapping[str, Any]], None]:
    def report(event: LogEvent, fields: Mapping[str, Any]) -> None:
        log(event, stack=stack, **fields)

    return report


def _all(stacks: Sequence[_Stack], work: Callable[[_Stack], None]) -> None:
    """Runs `work(stack)` for every stack concurrently (shards in parallel), and waits for them all."""
    threads = [threading.Thread(target=work, args=(s,), name=f"stack-{s.target.stack}") for s in stacks]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
