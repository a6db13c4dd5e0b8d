"""Read-only handlers for what resources depend on: sites and domains (contract §4)."""

from __future__ import annotations

from pangolin_emulator import schemas
from pangolin_emulator.context import Context, Reply
from pangolin_emulator.listing import limit_offset_window, page_window, text_filter
from pangolin_emulator.shapes import domain_row, site_list_item, site_row

__all__ = ["get_domain", "get_site", "list_domains", "list_sites"]


def list_sites(ctx: Context) -> Reply:
    features = ctx.features
    query = schemas.site_list_query(features).validate(ctx.query)
    sites = ctx.store.list_sites(ctx.org_id)
    if features.page_pagination:
        search = text_filter(query.get("query"))
        if search is not None:
            sites = [s for s in sites if search in s["name"].lower() or search in s["niceId"].lower()]
        if query.get("online") == "false":
            sites = []  # every emulated site is online
        sites.sort(key=lambda s: (s["name"], s["siteId"]), reverse=query["order"] == "desc")
        window, pagination = page_window(sites, query)
    else:
        window, pagination = limit_offset_window(sites, query)
    targets = ctx.store.list_targets()
    items = [
        site_list_item(s, ctx.org_id, len({t["resourceId"] for t in targets if t["siteId"] == s["siteId"]}))
        for s in window
    ]
    return Reply(200, "Sites retrieved successfully", {"sites": items, "pagination": pagination})


def get_site(ctx: Context) -> Reply:
    return Reply(200, "Site retrieved successfully", site_row(ctx.entities["site"]))


def list_domains(ctx: Context) -> Reply:
    query = schemas.domain_list_query(ctx.features).validate(ctx.query)
    window, pagination = limit_offset_window(ctx.store.list_domains(ctx.org_id), query)
    items = [domain_row(d) for d in window]
    return Reply(200, "Domains retrieved successfully", {"domains": items, "pagination": pagination})


def get_domain(ctx: Context) -> Reply:
    return Reply(200, "Domain retrieved successfully", domain_row(ctx.entities["domain"]))
