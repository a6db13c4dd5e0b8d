"""Handlers for targets (contract §3)."""

from __future__ import annotations

import secrets

from pangolin_emulator import schemas
from pangolin_emulator.context import Context, Reply
from pangolin_emulator.errors import not_found
from pangolin_emulator.listing import limit_offset_window
from pangolin_emulator.shapes import target_list_item, target_row
from pangolin_emulator.store import Row

__all__ = ["create_target", "delete_target", "get_target", "list_targets", "update_target"]

_HEALTH_DEFAULTS: Row = {
    "hcEnabled": False, "hcPath": None, "hcScheme": None, "hcMode": None, "hcHostname": None,
    "hcPort": None, "hcInterval": None, "hcUnhealthyInterval": None, "hcTimeout": None,
    "hcHeaders": None, "hcFollowRedirects": None, "hcMethod": None, "hcStatus": None,
    "hcHealth": "unknown", "hcTlsServerName": None, "hcHealthyThreshold": None,
    "hcUnhealthyThreshold": None, "name": None,
}  # fmt: skip


def _require_site(ctx: Context, site_id: object) -> Row:
    # The site is not checked against the resource's org, as in Pangolin (contract §3).
    site = ctx.store.get_site(int(str(site_id)))
    if site is None:
        raise not_found("Site", site_id)
    return site


def _internal_port() -> int:
    # pickPort chooses a free port on the exit node; any plausible number will do here.
    return 40000 + secrets.randbelow(20000)


def create_target(ctx: Context) -> Reply:
    resource = ctx.entities["resource"]
    parsed = schemas.target_body(ctx.features, update=False).validate(ctx.body)
    site = _require_site(ctx, parsed["siteId"])
    row: Row = {
        "resourceId": resource["resourceId"],
        "method": None, "path": None, "pathMatchType": None, "rewritePath": None,
        "rewritePathType": None, "priority": None, "mode": None, "authToken": None, "providerId": None,
        **_HEALTH_DEFAULTS,
        **parsed,
        # Local sites need no tunnel port; newt/wireguard sites get one picked by the server.
        "internalPort": None if site["type"] == "local" else _internal_port(),
    }  # fmt: skip
    created = ctx.store.insert_target(row)
    return Reply(201, "Target created successfully", target_row(created, resource["orgId"], ctx.features))


def get_target(ctx: Context) -> Reply:
    target = ctx.entities["target"]
    return Reply(200, "Target retrieved successfully", target_row(target, ctx.org_id, ctx.features))


def update_target(ctx: Context) -> Reply:
    target = ctx.entities["target"]
    parsed = schemas.target_body(ctx.features, update=True).validate(ctx.body)
    _require_site(ctx, parsed["siteId"])
    # Update re-picks internalPort, even for local sites (Addendum 5).
    updated = ctx.store.update_target(target["targetId"], {**parsed, "internalPort": _internal_port()})
    return Reply(200, "Target updated successfully", target_row(updated, ctx.org_id, ctx.features))


def delete_target(ctx: Context) -> Reply:
    ctx.store.delete_target(ctx.entities["target"]["targetId"])
    return Reply(200, "Target deleted successfully", None)


def list_targets(ctx: Context) -> Reply:
    resource = ctx.entities["resource"]
    query = schemas.target_list_query(ctx.features).validate(ctx.query)
    window, pagination = limit_offset_window(query).of(ctx.store.list_targets(resource["resourceId"]))
    items = [target_list_item(t, ctx.store.get_site(t["siteId"]), ctx.features) for t in window]
    return Reply(200, "Targets retrieved successfully", {"targets": items, "pagination": pagination})
