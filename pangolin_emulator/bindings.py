"""Which ports the raw resources claim: shared by the data plane and the admin API."""

from __future__ import annotations

from dataclasses import dataclass

from pangolin_emulator.store import Row

__all__ = ["Binding", "desired_bindings", "doubly_bound", "doubly_routed"]

RAW_MODES = ("tcp", "udp")


@dataclass(frozen=True)
class Binding:
    """One TCP listener the data plane should run."""

    port: int
    resource_id: int
    upstreams: tuple[tuple[str, int], ...]
    """Enabled targets as (ip, port), in target-id order."""


def doubly_bound(resources: list[Row]) -> dict[int, list[int]]:
    """Ports bound by two or more enabled raw resources of the same protocol."""
    groups: dict[tuple[str, int], list[int]] = {}
    for row in resources:
        if row["mode"] in RAW_MODES and row["enabled"] and row.get("proxyPort") is not None:
            groups.setdefault((row["mode"], int(row["proxyPort"])), []).append(int(row["resourceId"]))
    result: dict[int, list[int]] = {}
    for (_, port), ids in sorted(groups.items(), key=lambda item: item[0][1]):
        if len(ids) > 1:
            result.setdefault(port, []).extend(sorted(ids))
    return result


def doubly_routed(resources: list[Row], targets: list[Row]) -> dict[int, list[int]]:
    """Ports that two or more enabled TCP resources with an enabled target bind: what Traefik would route twice
    (two routers on one entry point). A resource with no enabled target has no router, so it routes nothing."""
    routed = {int(t["resourceId"]) for t in targets if t["enabled"]}
    return doubly_bound([r for r in resources if r["mode"] == "tcp" and int(r["resourceId"]) in routed])


def desired_bindings(resources: list[Row], targets: list[Row]) -> dict[int, Binding]:
    """TCP listeners for enabled TCP resources with at least one enabled target.

    When several resources share a port, Traefik would pick one of its routers; the emulator
    deterministically serves the lowest resource id.
    """
    upstreams: dict[int, list[tuple[str, int]]] = {}
    for target in targets:
        if target["enabled"]:
            upstreams.setdefault(int(target["resourceId"]), []).append((str(target["ip"]), int(target["port"])))
    result: dict[int, Binding] = {}
    for row in sorted(resources, key=lambda r: int(r["resourceId"])):
        port = row.get("proxyPort")
        ups = upstreams.get(int(row["resourceId"]))
        if row["mode"] != "tcp" or not row["enabled"] or port is None or not ups or port in result:
            continue
        result[int(port)] = Binding(int(port), int(row["resourceId"]), tuple(ups))
    return result
