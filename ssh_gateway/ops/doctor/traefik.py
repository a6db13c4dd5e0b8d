"""The gateway host's Traefik, through its API: does it listen on every entry point the stack needs?

Pangolin's routers name entry points `tcp-<port>` that only Traefik's static configuration can create, read at
start-up (fosrl/pangolin #375, #821): a port the stack allocated after the last restart, or a range edited by
hand, has a router Traefik cannot attach. `GET <api>/entrypoints` (Traefik's API, `api.insecure` or behind its
own router) lists what it listens on.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from ssh_gateway.core.outputs import parse_stack_outputs

__all__ = ["check_entry_points"]


@dataclass(frozen=True)
class TraefikFinding:
    """What the stack needs of Traefik and what it lacks (None: Traefik's API did not answer)."""

    api_url: str
    needed: tuple[str, ...]
    missing: tuple[str, ...] | None
    detail: str

    @property
    def ok(self) -> bool:
        return self.missing == ()

    def as_json(self) -> dict[str, Any]:
        return {"api": self.api_url, "needed": list(self.needed), "missing": self.missing, "detail": self.detail}


def check_entry_points(outputs: Mapping[str, Any], api_url: str, *, stack: str, timeout: float) -> TraefikFinding:
    """Compares the stack's `gateway.traefikEntryPoints` with the entry points Traefik's API at `api_url` lists."""
    gateway = parse_stack_outputs(outputs).gateway
    needed = tuple(sorted(gateway.traefik_entry_points)) if gateway is not None else ()
    url = api_url.rstrip("/")
    try:
        response = httpx.get(f"{url}/entrypoints", timeout=timeout)
        response.raise_for_status()
        listed = {str(entry["name"]) for entry in response.json()}
    except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
        return TraefikFinding(url, needed, None, f"Traefik's API at {url} did not list its entry points: {exc}")
    missing = tuple(name for name in needed if name not in listed)
    if not missing:
        return TraefikFinding(url, needed, (), f"Traefik at {url} has all {len(needed)} entry points the stack needs")
    shown = ", ".join(missing[:10]) + (f" and {len(missing) - 10} more" if len(missing) > 10 else "")
    return TraefikFinding(
        url,
        needed,
        missing,
        f"Traefik at {url} lacks entry point(s) {shown} that stack {stack} needs (output gateway.traefikEntryPoints); "
        f"fix: add them to Traefik's static configuration (ssh-gateway gateway-config --stack {stack} --write DIR) "
        "and restart Traefik once",
    )
