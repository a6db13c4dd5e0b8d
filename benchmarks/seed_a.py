"""Seed A's controller (`shared/seeds/000_…txt`, "Attempt 3"), as the write-up's patch runs it, for the benchmark.

A kopf handler watches Services named `ssh-*` and mirrors each into a Pangolin raw TCP resource on the lowest free
port of a range: list the org's resources, take the lowest port no resource has, write it, add the target on the
Service's nodePort. Nothing serialises two handlers, so two Services handled at once can read the same listing and
take the same port: the write-up's "10 of 30 instances shared a port". Run it with `kopf run --standalone`:
kopf handles each object in a task of its own and runs sync handlers in its thread pool, as the seed's did.

Written from the write-up and Pangolin's contract (docs/pangolin-api.md); it shares nothing with the program (it
is what we compare against). Two changes only, so that it runs on Pangolin >= 1.10: the port goes into the
create (a raw create without `proxyPort` is refused since 1.10; the seed set it right after, which races the
same way), and the create uses the 1.19+ `mode` body.
"""

from __future__ import annotations

import os
from typing import Any

import httpx
import kopf

_RANGE = os.environ.get("SSH_PROXY_PORT_RANGE", "40000-40100")
_PORT_MIN, _PORT_MAX = (int(x) for x in _RANGE.split("-", 1))


def _cli() -> httpx.Client:
    return httpx.Client(
        base_url=os.environ["PANGOLIN_URL"],
        headers={"Authorization": f"Bearer {os.environ['PANGOLIN_API_KEY']}"},
        timeout=30,
    )


def _list_resources(cli: httpx.Client) -> list[dict[str, Any]]:
    org = os.environ["PANGOLIN_ORG"]
    found: list[dict[str, Any]] = []
    page = 1
    while True:
        r = cli.get(f"/org/{org}/resources", params={"page": page, "pageSize": 100})
        r.raise_for_status()
        data = r.json()["data"]
        found += data["resources"]
        if len(found) >= data["pagination"]["total"] or not data["resources"]:
            return found
        page += 1


def _used_proxy_ports(cli: httpx.Client) -> set[int]:
    """Ports already taken by any resource in the org."""
    return {int(r["proxyPort"]) for r in _list_resources(cli) if r.get("proxyPort")}


def _pick_free_ssh_port(cli: httpx.Client) -> int:
    """Lowest free port in the range."""
    used = _used_proxy_ports(cli)
    for p in range(_PORT_MIN, _PORT_MAX + 1):
        if p not in used:
            return p
    raise kopf.PermanentError(f"no free proxy port in {_RANGE}")


def _find_resource_by_name(cli: httpx.Client, name: str) -> dict[str, Any] | None:
    return next((r for r in _list_resources(cli) if r.get("name") == name), None)


@kopf.on.create("", "v1", "services", when=lambda name, **_: str(name).startswith("ssh-"))  # type: ignore[arg-type]
def ensure_ssh_mapping(name: str, spec: dict[str, Any], logger: Any, **_: Any) -> dict[str, Any]:
    node_port = next(p["nodePort"] for p in spec["ports"] if p.get("port") == 22)
    fqdn = f"{name}.example.com"
    with _cli() as cli:
        existing = _find_resource_by_name(cli, fqdn)
        if existing:
            return {"resourceId": existing["resourceId"], "fqdn": fqdn}
        port = _pick_free_ssh_port(cli)
        org = os.environ["PANGOLIN_ORG"]
        r = cli.put(f"/org/{org}/resource", json={"name": fqdn, "mode": "tcp", "proxyPort": port})
        r.raise_for_status()
        rid = r.json()["data"]["resourceId"]
        try:
            t = cli.put(
                f"/resource/{rid}/target",
                json={"siteId": int(os.environ["PANGOLIN_SITE"]), "ip": os.environ["NODE_IP"], "port": node_port},
            )
            t.raise_for_status()
        except Exception:
            cli.delete(f"/resource/{rid}")
            raise
    logger.info(f"{fqdn}: created tcp resource={rid} proxyPort={port} -> {os.environ['NODE_IP']}:{node_port}")
    return {"resourceId": rid, "fqdn": fqdn, "proxyPort": port}
