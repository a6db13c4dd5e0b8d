"""Read-only handlers for what resources depend on: sites, domains and orgs (contract §4)."""

from __future__ import annotations

from pangolin_emulator import schemas
from pangolin_emulator.context import Context, Reply
from pangolin_emulator.listing import limit_offset_window, page_window, search_pattern
from pangolin_emulator.shapes import domain_row, site_list_item, site_row

__all__ = ["get_domain", "get_site", "list_domains", "list_orgs", "list_sites"]


def list_sites(ctx: Context) -> Reply:
    features = ctx.features
    query = schemas.site_list_query(features).validate(ctx.query)
    if features.page_pagination:
        # Upstream searches name and niceId (and label names in 1.22; the emulator has none).
        sites = ctx.store.list_sites(ctx.org_id, search_pattern(query.get("query")))
        if query.get("online") == "false":
            sites = []  # every emulated site is online
        sites.sort(key=lambda s: (s["name"], s["siteId"]), reverse=query["order"] == "desc")
        window, pagination = page_window(query).of(sites)
    else:
        window, pagination = limit_offset_window(query).of(ctx.store.list_sites(ctx.org_id))
    items = [site_list_item(s, ctx.org_id, ctx.store.site_resource_count(s["siteId"]), features) for s in window]
    return Reply(200, "Sites retrieved successfully", {"sites": items, "pagination": pagination})


def get_site(ctx: Context) -> Reply:
    return Reply(200, "Site retrieved successfully", site_row(ctx.entities["site"]))


def list_domains(ctx: Context) -> Reply:
    query = schemas.domain_list_query(ctx.features).validate(ctx.query)
    window, pagination = limit_offset_window(query).of(ctx.store.list_domains(ctx.org_id))
    items = [domain_row(d) for d in window]
    return Reply(200, "Domains retrieved successfully", {"domains": items, "pagination": pagination})


def get_domain(ctx: Context) -> Reply:
    return Reply(200, "Domain retrieved successfully", domain_row(ctx.entities["domain"]))


def list_orgs(ctx: Context) -> Reply:
    """GET /orgs (root keys only, contract §4.3). Pangolin returns whole `orgs` rows, which the
    OpenAPI document leaves open (`orgs: [object]`); the emulator's orgs have only an id and a name."""
    query = schemas.org_list_query(ctx.features).validate(ctx.query)
    window, pagination = limit_offset_window(query).of(ctx.store.list_orgs())
    items = [{"orgId": org["orgId"], "name": org["name"]} for org in window]
    return Reply(200, "Organizations retrieved successfully", {"orgs": items, "pagination": pagination})
