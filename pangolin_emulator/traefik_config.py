"""Traefik's dynamic configuration for the raw resources, as Pangolin's internal API serves it to Traefik's HTTP
provider (`GET /api/v1/traefik-config`; contract: docs/pangolin-api.md §2.4.1, `server/lib/traefik/
getTraefikConfig.ts` upstream).

Per enabled `tcp`/`udp` resource with at least one enabled target: a router `<id>-<name>-router` on the entry
point `<mode>-<proxyPort>` (TCP routers match ``HostSNI(`*`)``, UDP routers have no rule) and a service
`<id>-<name>-service` whose servers are the enabled targets' `ip:port`, in target-id order. Disabled resources,
disabled targets and resources left without an enabled target are not emitted. Two enabled resources on one
port give two routers on one entry point: Pangolin does not refuse them, so neither does this.

The emulator's sites are all `local`, whose targets Traefik reaches directly; `newt` sites, which go through the
tunnel, are not emulated.
"""

from __future__ import annotations

import re
from typing import Any

from pangolin_emulator.bindings import RAW_MODES
from pangolin_emulator.store import Row

__all__ = ["TRAEFIK_CONFIG_PATH", "sanitize", "traefik_config"]

TRAEFIK_CONFIG_PATH = "/api/v1/traefik-config"
"""The internal API's route Traefik's HTTP provider polls."""
_NAME_LIMIT = 50
_OUTSIDE = re.compile(r"[^A-Za-z0-9-]")
_DASHES = re.compile(r"-+")


def sanitize(name: str) -> str:
    """Pangolin's `sanitize` (server/lib/traefik/utils.ts): cut to 50 characters first, then every character
    outside [A-Za-z0-9-] becomes `-`, runs of `-` collapse to one, and leading and trailing `-` go."""
    return _DASHES.sub("-", _OUTSIDE.sub("-", name[:_NAME_LIMIT])).strip("-")


def traefik_config(resources: list[Row], targets: list[Row]) -> dict[str, Any]:
    """The `tcp` and `udp` parts of the payload for these stored rows, each only when it has a router: Traefik's
    HTTP provider refuses the whole payload when it holds an empty map ("routers cannot be a standalone
    element"), so an empty part is left out, as is the `http` part (the emulator has no HTTP resource)."""
    servers: dict[int, list[dict[str, str]]] = {}
    for target in sorted(targets, key=lambda t: int(t["targetId"])):
        if target["enabled"]:
            address = {"address": f"{target['ip']}:{int(target['port'])}"}
            servers.setdefault(int(target["resourceId"]), []).append(address)
    parts: dict[str, dict[str, dict[str, Any]]] = {mode: {"routers": {}, "services": {}} for mode in RAW_MODES}
    for row in sorted(resources, key=lambda r: int(r["resourceId"])):
        resource_id, mode, port = int(row["resourceId"]), row["mode"], row.get("proxyPort")
        ours = servers.get(resource_id)
        if mode not in RAW_MODES or not row["enabled"] or port is None or not ours:
            continue
        key = f"{resource_id}-{sanitize(str(row['name']))}"
        router: dict[str, Any] = {"entryPoints": [f"{mode}-{int(port)}"], "service": f"{key}-service"}
        if mode == "tcp":
            router["rule"] = "HostSNI(`*`)"
        parts[mode]["routers"][f"{key}-router"] = router
        parts[mode]["services"][f"{key}-service"] = {"loadBalancer": {"servers": ours}}
    return {mode: part for mode, part in parts.items() if part["routers"]}
