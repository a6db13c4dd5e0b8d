"""The dynamic provider behind `PortAllocation`: the stack's port table, decided in `check`.

`check` receives the previous checked inputs (the table as stored in state) and returns the new table from
`allocate`, a pure function. Because the table is part of the checked inputs, the engine hands it back as
the resource's outputs even in preview (dynamic providers do not implement preview, so the engine echoes
the inputs), so a pull request's preview shows concrete ports. Being one resource, the table is decided in
one place: parallel creates of the instances cannot collide.

The one read-only listing of the Pangolin org per run also tells which ports other owners hold.
"""

from __future__ import annotations

from typing import Any, Final

from pulumi.dynamic import (
    CheckFailure,
    CheckResult,
    CreateResult,
    DiffResult,
    ReadResult,
    ResourceProvider,
    UpdateResult,
)
from pulumi.runtime.rpc import UNKNOWN

from providers.pangolin import org_snapshot
from providers.pangolin.client import PangolinClient
from providers.pangolin.credentials import ApiKeyFromConfig
from providers.pangolin.errors import PangolinError

from .allocate import AllocationError, AllocationState, PortRange, allocate

ALLOCATION_ID: Final = "port-allocation"

# The inputs the table is computed from, and (with the table: `ports`, `released`) what the diff compares.
_INPUT_KEYS: Final = ("instances", "pins", "range", "reserved", "apiUrl", "orgId", "ownerPrefix")
_KEYS: Final = (*_INPUT_KEYS, "ports", "released")


def _has_unknowns(value: Any) -> bool:
    if isinstance(value, dict):
        return any(_has_unknowns(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_unknowns(v) for v in value)
    return bool(value == UNKNOWN)


def _ints(mapping: dict[str, Any]) -> dict[str, int]:
    # The engine hands numbers back as floats.
    return {str(k): int(v) for k, v in (mapping or {}).items()}


class PortAllocationProvider(ApiKeyFromConfig, ResourceProvider):
    """Keeps `ports` (instance -> port) and `released` (freed ports, oldest first) in the inputs."""

    # Captures nothing secret: the API key arrives through `configure`, in the provider process.
    serialize_as_secret_always = False

    def check(self, olds: dict[str, Any], news: dict[str, Any]) -> CheckResult:
        if _has_unknowns({k: news.get(k) for k in _INPUT_KEYS}):
            return CheckResult(news, [])
        start, end = (int(p) for p in str(news["range"]).split("-"))
        previous = AllocationState(
            ports=_ints(olds.get("ports", {})), released=tuple(int(p) for p in olds.get("released", ()))
        )
        try:
            foreign = self._foreign_ports(news, previous)
        except PangolinError as exc:
            return CheckResult(
                news, [CheckFailure("orgId", f"cannot list the Pangolin org to find ports in use: {exc}")]
            )
        try:
            state = allocate(
                instances=list(news.get("instances", [])),
                port_range=PortRange(start=start, end=end),
                pins=_ints(news.get("pins", {})),
                reserved=[int(p) for p in news.get("reserved", [])],
                foreign=foreign,
                previous=previous,
            )
        except AllocationError as exc:
            return CheckResult(news, [CheckFailure("instances", problem) for problem in exc.problems])
        return CheckResult({**news, "ports": dict(sorted(state.ports.items())), "released": list(state.released)}, [])

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        changed = [k for k in _KEYS if olds.get(k) != news.get(k) or news.get(k) == UNKNOWN]
        return DiffResult(changes=bool(changed), replaces=[], delete_before_replace=False)

    def create(self, props: dict[str, Any]) -> CreateResult:
        return CreateResult(ALLOCATION_ID, props)

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return UpdateResult(news)

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        # The table lives only in state: refresh keeps it as it is.
        return ReadResult(id_, props, {k: v for k, v in props.items() if k != "__provider"})

    def _foreign_ports(self, news: dict[str, Any], previous: AllocationState) -> dict[int, str]:
        """Ports bound in the org by any resource but the one this stack names for the port's owner.

        A leftover of this stack (an instance removed while Pangolin was unreachable) counts as foreign
        too, so its port is never handed to a new instance while still bound.
        """
        url, org, prefix = news.get("apiUrl"), news.get("orgId"), str(news.get("ownerPrefix", ""))
        if not url or not org:
            return {}
        with PangolinClient(str(url), self.api_key()) as client:
            resources = client.list_all_resources(str(org))
        org_snapshot.record(str(url), str(org), resources)
        owner = {port: f"{prefix}{instance}" for instance, port in previous.ports.items()}
        return {
            r.proxyPort: f"Pangolin resource {r.resourceId} {r.name!r}"
            for r in resources
            if r.proxyPort is not None and r.raw_protocol is not None and owner.get(r.proxyPort) != r.name
        }
