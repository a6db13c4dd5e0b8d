"""The doctor's findings as a table for people and as JSON for tools."""

from __future__ import annotations

from typing import Any

from ssh_gateway.core.outputs import Routing

from .model import LAYERS, InstanceReport

__all__ = ["as_json", "render"]

_SHOWN = {"ok": "ok", "fail": "FAIL", "warn": "warn", "skip": "-"}


def as_json(reports: list[InstanceReport], *, stack: str, elapsed: float) -> dict[str, Any]:
    return {
        "stack": stack,
        "healthy": all(r.broken is None for r in reports),
        "elapsed": round(elapsed, 3),
        "instances": [
            {
                "instance": r.endpoint.instance,
                "host": r.endpoint.host,
                "port": r.endpoint.port,
                "user": r.endpoint.user,
                "routing": r.endpoint.routing.value,
                "authority": r.endpoint.authority,
                "pangolinResourceId": r.endpoint.resource_id,
                "healthy": r.broken is None,
                "brokenLayer": r.broken.layer if r.broken else None,
                "problem": r.broken.detail if r.broken else None,
                "fix": r.broken.fix if r.broken else None,
                "checks": [{"layer": c.layer, "status": c.status, "detail": c.detail, "fix": c.fix} for c in r.checks],
            }
            for r in reports
        ],
    }


def render(reports: list[InstanceReport], *, stack: str, elapsed: float) -> str:
    """A table (one row per instance, one column per layer) and, below it, each problem with its fix. The
    CONNECT column only where some instance is in connect mode."""
    routed = any(r.endpoint.routing is Routing.CONNECT for r in reports)
    layers = [layer for layer in LAYERS if layer != "connect" or routed]
    header = ["INSTANCE", "ENDPOINT", *(layer.upper() for layer in layers), "VERDICT"]
    rows = [header]
    for r in reports:
        broken = r.broken
        verdict = "healthy" if broken is None else f"broken: {broken.layer}"
        cells = [_SHOWN[r.check(layer).status] for layer in layers]
        rows.append([r.endpoint.instance, f"{r.endpoint.host}:{r.endpoint.port}", *cells, verdict])
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]

    notes = []
    for r in reports:
        broken = r.broken
        if broken is not None:
            notes.append(f"{r.endpoint.instance}: {broken.detail}")
            notes.append(f"    fix: {broken.fix}")
            for other in r.checks:
                if other.status == "fail" and other is not broken:
                    notes.append(f"    also seen: {other.detail}")
        for check in r.checks:
            if check.status == "warn":
                notes.append(f"{r.endpoint.instance}: warning: {check.detail}")
    broken_count = sum(r.broken is not None for r in reports)
    summary = (
        f"{len(reports)} instance(s) of stack {stack}: "
        + ("all healthy" if not broken_count else f"{broken_count} broken")
        + f" ({elapsed:.1f}s)"
    )
    return "\n".join([*lines, *(["", *notes] if notes else []), "", summary]) + "\n"
