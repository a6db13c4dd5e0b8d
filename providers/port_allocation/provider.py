"""The dynamic provider behind `PortAllocation`: the stack's port table, decided in `check`.

`check` receives the previous checked inputs (the table as stored in state) and returns the new table from
`allocate`, a pure function. Because the table is part of the checked inputs, the engine hands it back as
the resource's outputs even in preview (dynamic providers do not implement preview, so the engine echoes
the inputs), so a pull request's preview shows concrete ports. Being one resource, the table is decided in
one place: parallel creates of the instances cannot collide.

Which ports others hold in the org reaches `check` as data (`held`, from the program's one listing of the
org); `check` uses it and drops it, so it is neither stored in state nor part of the diff. With it `check`
applies the lowest-id rule (`ssh_gateway.core.org.contest`): new instances avoid every held port, and an
instance whose port an older resource of someone else owns (an overlapping run of another stack got there
first) moves to a free one, which the preview shows as its new `proxyPort`.

Do not move or rename this module or its provider class: each resource's `__provider` in every stack's state is a
pickle of `providers.port_allocation.provider` `PortAllocationProvider` (providers/__init__.py; pinned by
tests/unit/test_provider_paths.py).
"""

from __future__ import annotations

from typing import Any, Final

from pulumi import dynamic

from providers.key_diff import diff_keys, without_provider
from providers.unknowns import has_unknowns
from ssh_gateway.core.allocation import AllocationError, AllocationState, allocate
from ssh_gateway.core.org import Binding, contest
from ssh_gateway.core.ports import PortRange
from ssh_gateway.core.refusal_note import note_refusal

ALLOCATION_ID: Final = "port-allocation"

# The inputs the table is computed from, and (with the table: `ports`, `released`) what the diff compares.
_INPUT_KEYS: Final = ("instances", "pins", "start", "end", "reserved", "ownerPrefix")
_KEYS: Final = (*_INPUT_KEYS, "ports", "released")


def _held(props: dict[str, Any]) -> dict[int, list[Binding]]:
    """`held` as `PortAllocation` passes it: port (a string key) -> bindings as plain dicts."""
    return {
        int(port): [
            Binding(
                port=int(port),
                resource_id=int(b["id"]),
                name=str(b["name"]),
                protocol=str(b["protocol"]),
                enabled=bool(b["enabled"]),
            )
            for b in bindings
        ]
        for port, bindings in props.items()
    }


def _found_by_name(
    held: dict[int, list[Binding]], prefix: str, instances: list[str], kept: dict[str, int]
) -> dict[str, int]:
    """Listed instances the table lacks whose own Pangolin resource (found by its name, the lowest id of twins)
    binds a port: that port, as if the table had it.

    A table is lacking after a lost run: a first `up` with `PULUMI_SKIP_CHECKPOINTS` that was killed keeps no
    state at all, while its Pangolin resources exist and serve. The next `up` adopts each resource by name;
    with its port kept too, nothing moves (and no NSG rule or known_hosts line changes). A resource of an
    instance no longer listed stays someone else's (`contest`), as before.
    """
    wanted = {f"{prefix}{name}": name for name in instances if name not in kept}
    found: dict[str, tuple[int, int]] = {}
    for port, bindings in held.items():
        for binding in bindings:
            name = wanted.get(binding.name)
            if name is not None and (name not in found or binding.resource_id < found[name][0]):
                found[name] = (binding.resource_id, port)
    return {name: port for name, (_, port) in found.items()}


def _ints(mapping: dict[str, Any] | None) -> dict[str, int]:
    # The engine hands numbers back as floats.
    return {str(k): int(v) for k, v in (mapping or {}).items()}


class PortAllocationProvider(dynamic.ResourceProvider):
    """Keeps `ports` (instance -> port) and `released` (freed ports, oldest first) in the inputs."""

    # Captures nothing, secret or otherwise: the table is computed from the inputs alone.
    serialize_as_secret_always = False

    def check(self, olds: dict[str, Any], news: dict[str, Any]) -> dynamic.CheckResult:
        held = news.pop("held", None) or {}
        if has_unknowns({k: news.get(k) for k in _INPUT_KEYS}) or has_unknowns(held):
            return dynamic.CheckResult(news, [])
        prefix = str(news.get("ownerPrefix", ""))
        kept = _ints(olds.get("ports"))
        previous = AllocationState(
            ports={**_found_by_name(_held(held), prefix, news.get("instances", []), kept), **kept},
            released=tuple(int(p) for p in olds.get("released") or ()),
        )
        pins = _ints(news.get("pins"))
        # Who claims each port: the previous table's owner, or the instance pinned to it.
        owners = {port: f"{prefix}{instance}" for instance, port in {**previous.ports, **pins}.items()}
        contested = contest(_held(held), owners)
        try:
            state = allocate(
                instances=list(news.get("instances", [])),
                port_range=PortRange(start=int(news["start"]), end=int(news["end"])),
                pins=pins,
                reserved=[int(p) for p in news.get("reserved", [])],
                foreign=contested.foreign,
                lost=contested.lost,
                previous=previous,
            )
        except AllocationError as exc:
            for problem in exc.problems:
                note_refusal(problem)  # the same at every run until the range or the instances change
            # No property: the engine then prints the reason alone, not the (long) value of one.
            return dynamic.CheckResult(news, [dynamic.CheckFailure("", problem) for problem in exc.problems])
        return dynamic.CheckResult(
            {**news, "ports": dict(sorted(state.ports.items())), "released": list(state.released)}, []
        )

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> dynamic.DiffResult:
        return diff_keys(olds, news, _KEYS)

    def create(self, props: dict[str, Any]) -> dynamic.CreateResult:
        return dynamic.CreateResult(ALLOCATION_ID, props)

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> dynamic.UpdateResult:
        return dynamic.UpdateResult(news)

    def read(self, id_: str, props: dict[str, Any]) -> dynamic.ReadResult:
        # The table lives only in state: refresh keeps it as it is.
        return dynamic.ReadResult(id_, props, without_provider(props))
