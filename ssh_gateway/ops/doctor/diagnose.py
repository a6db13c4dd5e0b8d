"""Run every instance's checks concurrently, each instance within one timeout."""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor

from ssh_gateway.core.outputs import Routing

from .checks import network_checks
from .connect import connect_checks
from .model import Check, Endpoint, InstanceReport
from .pangolin import check_pangolin

__all__ = ["diagnose"]

_MAX_WORKERS = 64


def diagnose(endpoints: list[Endpoint], *, api_url: str, api_key: str | None, timeout: float) -> list[InstanceReport]:
    """Each instance's network path and its Pangolin side run in parallel, and all instances at once (up to
    32), so a run takes about one `timeout` however many layers are broken."""
    if not endpoints:
        return []
    workers = min(_MAX_WORKERS, 2 * len(endpoints))
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="doctor") as pool:
        jobs: list[tuple[Endpoint, Future[list[Check]], Future[Check]]] = [
            (
                ep,
                pool.submit(connect_checks if ep.routing is Routing.CONNECT else network_checks, ep, timeout),
                pool.submit(check_pangolin, ep, api_url, api_key, timeout),
            )
            for ep in endpoints
        ]
        return [InstanceReport(ep, (*net.result(), pangolin.result())) for ep, net, pangolin in jobs]
