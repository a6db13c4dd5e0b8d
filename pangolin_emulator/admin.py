"""Test-only admin API under `/__emulator` (no auth; not part of Pangolin).

- `GET  counters`        → `{"calls": {route: n}, "faults": {route: n}, "fault_kinds": {kind: n},
  "route_fault_kinds": {route: {kind: n}}}`: every call that matched a route template is counted
  in `calls`, and those answered (or, for "timeout-after-write", left unanswered) by an injected
  fault are also counted by route and kind
- `POST counters/reset`  → zero all counters
- `GET  doubly-bound`    → `{"<port>": [resourceId, …]}` for ports bound by ≥2 enabled raw
  resources of the same protocol
- `GET  faults` / `POST faults` with `{"rate", "seed", "kinds", "delay"}` (each optional, the
  current value stays) → fault settings
- `GET  state`           → every resource and target as stored (version-neutral rows)
"""

from __future__ import annotations

from typing import Any

from pangolin_emulator.bindings import doubly_bound
from pangolin_emulator.faults import FaultConfig, FaultInjector, parse_kinds
from pangolin_emulator.store import Store

__all__ = ["ADMIN_PREFIX", "handle_admin"]

ADMIN_PREFIX = "/__emulator"


def _set_faults(faults: FaultInjector, body: object) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise ValueError('body must be a JSON object like {"rate": 0.2, "seed": 7, "kinds": ["500"]}')
    current = faults.config
    config = FaultConfig(
        rate=float(body.get("rate", current.rate)),
        seed=int(body.get("seed", current.seed)),
        kinds=parse_kinds(body.get("kinds", list(current.kinds))),
        delay=float(body.get("delay", current.delay)),
    )
    faults.configure(config)
    return faults.snapshot()


def _counters(store: Store) -> dict[str, Any]:
    calls, by_route = store.counters()
    kinds: dict[str, int] = {}
    for per_kind in by_route.values():
        for kind, count in per_kind.items():
            kinds[kind] = kinds.get(kind, 0) + count
    return {
        "calls": calls,
        "faults": {route: sum(per_kind.values()) for route, per_kind in by_route.items()},
        "fault_kinds": dict(sorted(kinds.items())),
        "route_fault_kinds": by_route,
    }


def handle_admin(store: Store, faults: FaultInjector, method: str, path: str, body: object) -> tuple[int, Any]:
    """(status, JSON body) for an admin request; 404 for anything unknown, 400 for bad input."""
    route = f"{method} {path.removeprefix(ADMIN_PREFIX).strip('/')}"
    try:
        if route == "GET counters":
            return 200, _counters(store)
        if route == "POST counters/reset":
            store.reset_counters()
            return 200, {"ok": True}
        if route == "GET doubly-bound":
            return 200, {str(port): ids for port, ids in doubly_bound(store.list_resources()).items()}
        if route == "GET faults":
            return 200, faults.snapshot()
        if route == "POST faults":
            return 200, _set_faults(faults, body)
        if route == "GET state":
            return 200, {"resources": store.list_resources(), "targets": store.list_targets()}
    except (ValueError, TypeError) as exc:
        return 400, {"error": str(exc)}
    return 404, {"error": f"no admin route {route!r}"}
