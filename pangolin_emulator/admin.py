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
- `GET  doubly-routed`   → `{"<port>": [resourceId, …]}` for ports that ≥2 enabled TCP resources with an
  enabled target bind: what Traefik would route twice (a resource without an enabled target has no router)
- `GET  gate` / `POST gate` with `{"route", "parties", "timeout"}` / `POST gate/open` → the test barrier
  (`gate.py`): arm it, see it, or disarm it
- `GET  state`           → every resource and target as stored (version-neutral rows)
"""

from __future__ import annotations

from typing import Any

from pangolin_emulator.bindings import doubly_bound, doubly_routed
from pangolin_emulator.faults import FaultConfig, FaultInjector, parse_kinds
from pangolin_emulator.gate import Gate, GateConfig
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


def _arm_gate(gate: Gate, body: object) -> dict[str, object]:
    if not isinstance(body, dict) or not isinstance(body.get("route"), str):
        raise ValueError('body must be a JSON object like {"route": "GET /v1/org/{orgId}/resources", "parties": 2}')
    gate.arm(GateConfig(str(body["route"]), int(body.get("parties", 2)), float(body.get("timeout", 20.0))))
    return gate.snapshot()


def handle_admin(
    store: Store, faults: FaultInjector, gate: Gate, method: str, path: str, body: object
) -> tuple[int, Any]:
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
        if route == "GET doubly-routed":
            routed = doubly_routed(store.list_resources(), store.list_targets())
            return 200, {str(port): ids for port, ids in routed.items()}
        if route == "GET gate":
            return 200, gate.snapshot()
        if route == "POST gate":
            return 200, _arm_gate(gate, body)
        if route == "POST gate/open":
            gate.disarm()
            return 200, gate.snapshot()
        if route == "GET faults":
            return 200, faults.snapshot()
        if route == "POST faults":
            return 200, _set_faults(faults, body)
        if route == "GET state":
            return 200, {"resources": store.list_resources(), "targets": store.list_targets()}
    except (ValueError, TypeError) as exc:
        return 400, {"error": str(exc)}
    return 404, {"error": f"no admin route {route!r}"}
