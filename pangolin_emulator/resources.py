"""Handlers for public resources: create, list, names, get, update, delete (contract §2)."""

from __future__ import annotations

import uuid
from typing import Any

from pangolin_emulator import schemas
from pangolin_emulator.context import Context, Reply
from pangolin_emulator.errors import INTERNAL, ApiError
from pangolin_emulator.listing import limit_offset_window, page_window, search_pattern
from pangolin_emulator.names import unique_nice_id
from pangolin_emulator.shapes import RAW_MODES, is_raw, resource_list_item, resource_row
from pangolin_emulator.store import Order, ResourceFilter, Row
from pangolin_emulator.validation import UNDEFINED, Issue, Obj

__all__ = [
    "create_resource",
    "delete_resource",
    "get_resource",
    "list_resource_names",
    "list_resources",
    "update_resource",
]

RAW_NOT_ALLOWED = "Raw resources are not allowed"


def _base_row(ctx: Context, name: str, mode: str) -> Row:
    """The columns a fresh row gets from Pangolin's defaults."""
    org_id = ctx.org_id
    row: Row = {
        "resourceGuid": str(uuid.uuid4()),
        "orgId": org_id,
        "niceId": unique_nice_id(lambda nice: ctx.store.nice_id_taken(org_id, nice)),
        "name": name,
        "subdomain": None,
        "fullDomain": None,
        "domainId": None,
        "ssl": False,
        "blockAccess": False,
        "sso": True,
        "proxyPort": None,
        "emailWhitelistEnabled": False,
        "applyRules": False,
        "enabled": True,
        "stickySession": False,
        "tlsServerName": None,
        "setHostHeader": None,
        "enableProxy": True,
        "skipToIdpId": None,
        "headers": None,
        "proxyProtocol": False,
        "proxyProtocolVersion": 1,
        "maintenanceModeEnabled": False,
        "maintenanceModeType": "forced",
        "maintenanceTitle": None,
        "maintenanceMessage": None,
        "maintenanceEstimatedTime": None,
        "postAuthPath": None,
        "health": "unknown",
        "wildcard": False,
        "mode": mode,
        "pamMode": "passthrough",
        "authDaemonMode": "site",
        "authDaemonPort": 22123,
        "status": "approved",
        "resourcePolicyId": None,
        "defaultResourcePolicyId": None,
    }
    if ctx.features.mode_model:
        # 1.19+: every create also inserts a default resource policy.
        row["defaultResourcePolicyId"] = ctx.store.new_policy_id(org_id)
    return row


def _insert_raw(ctx: Context, name: str, mode: str, port: int) -> Reply:
    row = _base_row(ctx, name, mode) | {"proxyPort": port}
    created = ctx.store.insert_resource(row)
    return Reply(201, "Non-http resource created successfully", resource_row(created, ctx.features, echo=True))


def _insert_http(ctx: Context, parsed: dict[str, object], mode: str) -> Reply:
    domain_id = str(parsed["domainId"])
    domain = ctx.store.get_org_domain(ctx.org_id, domain_id)
    if domain is None:
        raise ApiError(404, "Domain not found")
    subdomain = parsed.get("subdomain")
    full_domain = f"{subdomain}.{domain['baseDomain']}" if subdomain else str(domain["baseDomain"])
    # ≤1.21 rejects a taken domain; 1.22 regressed and accepts it (contract §2.7).
    if not ctx.features.policies and any(r.get("fullDomain") == full_domain for r in ctx.store.list_resources()):
        raise ApiError(409, "Resource with that domain already exists")
    row = _base_row(ctx, str(parsed["name"]), mode) | {
        "subdomain": subdomain,
        "fullDomain": full_domain,
        "domainId": domain_id,
        "ssl": True,
        "stickySession": parsed.get("stickySession", False),
        "postAuthPath": parsed.get("postAuthPath"),
    }
    created = ctx.store.insert_resource(row)
    return Reply(201, "Http resource created successfully", resource_row(created, ctx.features, echo=True))


def _legacy_mode(fields: dict[str, Any]) -> str | None:
    """resolveModeFromLegacyFields (1.19+): http/protocol → mode, None when unresolvable."""
    http, protocol = fields.get("http"), fields.get("protocol")
    if not isinstance(http, bool) or protocol not in RAW_MODES:
        return None
    if http and protocol == "udp":
        raise ApiError(400, "Invalid deprecated http/protocol combination")
    return "http" if http else str(protocol)


def create_resource(ctx: Context) -> Reply:
    """PUT /org/{orgId}/resource: dispatch between the raw and the HTTP schema by version."""
    if ctx.body is UNDEFINED:
        # Without Content-Type: application/json the handler dereferences an undefined body.
        raise ApiError(500, INTERNAL)
    fields: dict[str, Any] = ctx.body if isinstance(ctx.body, dict) else {}
    if ctx.features.mode_model:
        return _create_mode_dialects(ctx, fields)
    http = fields.get("http")
    if not isinstance(http, bool):
        raise ApiError(400, "http field is required")
    if http:
        parsed = schemas.http_create(ctx.features).validate(ctx.body)
        return _insert_http(ctx, parsed, "http")
    if not ctx.settings.allow_raw_resources:
        raise ApiError(400, RAW_NOT_ALLOWED)
    parsed = schemas.raw_create(ctx.features).validate(ctx.body)
    return _insert_raw(ctx, str(parsed["name"]), str(parsed["protocol"]), int(str(parsed["proxyPort"])))


def _create_mode_dialects(ctx: Context, fields: dict[str, Any]) -> Reply:
    legacy = _legacy_mode(fields)
    port = fields.get("proxyPort")
    if not isinstance(port, int | float) or isinstance(port, bool):
        # No numeric proxyPort: the HTTP path, which requires domainId (contract §2.2).
        parsed = schemas.http_create(ctx.features).validate(ctx.body)
        return _insert_http(ctx, parsed, str(parsed.get("mode") or legacy or "http"))
    if not ctx.settings.allow_raw_resources:
        raise ApiError(400, RAW_NOT_ALLOWED)

    def resolvable(parsed: dict[str, object]) -> Issue | None:
        # The misleading message is Pangolin's: the refine also fails for an unresolvable mode.
        return None if (parsed.get("mode") or legacy) in RAW_MODES else Issue(RAW_NOT_ALLOWED)

    base = schemas.raw_create(ctx.features)
    parsed = Obj(fields=base.fields, refines=(resolvable,)).validate(ctx.body)
    mode = str(parsed.get("mode") or legacy)
    return _insert_raw(ctx, str(parsed["name"]), mode, int(str(parsed["proxyPort"])))


def get_resource(ctx: Context) -> Reply:
    return Reply(200, "Resource retrieved successfully", resource_row(ctx.entities["resource"], ctx.features))


def _resource_filter(query: dict[str, object]) -> ResourceFilter:
    enabled = query.get("enabled")
    site_id = query.get("siteId")
    protocol = query.get("protocol")
    return ResourceFilter(
        search=search_pattern(query.get("query")),
        enabled=None if enabled is None else enabled == "true",
        site_id=None if site_id is None else float(str(site_id)),
        protocol=None if protocol is None else str(protocol),
    )


def list_resources(ctx: Context) -> Reply:
    features = ctx.features
    query = schemas.resource_list_query(features).validate(ctx.query)
    if features.page_pagination:
        window = page_window(query)
        order: Order = "name desc" if query["order"] == "desc" else "name"
        total, rows = ctx.store.page_resources(ctx.org_id, _resource_filter(query), order, window.start, window.size)
    else:
        window = limit_offset_window(query)
        total, rows = ctx.store.page_resources(ctx.org_id, ResourceFilter(), "id", window.start, window.size)
    by_resource: dict[int, list[Row]] = {}
    for target in ctx.store.targets_of([r["resourceId"] for r in rows]):
        by_resource.setdefault(target["resourceId"], []).append(target)
    sites = {s["siteId"]: s for s in ctx.store.list_sites(ctx.org_id)}
    items = [resource_list_item(r, by_resource.get(r["resourceId"], []), sites, features) for r in rows]
    return Reply(200, "Resources retrieved successfully", {"resources": items, "pagination": window.pagination(total)})


def list_resource_names(ctx: Context) -> Reply:
    """GET /org/{orgId}/resource-names. The OpenAPI document only says `data` is an object;
    this shape is the emulator's reading, not an observation."""
    rows = sorted(ctx.store.list_resources(ctx.org_id), key=lambda r: (r["name"], r["resourceId"]))
    names = [{"resourceId": r["resourceId"], "name": r["name"], "niceId": r["niceId"]} for r in rows]
    return Reply(200, "Resource names retrieved successfully", {"resources": names})


def update_resource(ctx: Context) -> Reply:
    """POST /resource/{id}: the schema follows the stored type (contract §2.5)."""
    row = ctx.entities["resource"]
    features = ctx.features
    raw = is_raw(row)
    schema = schemas.raw_update(features, ctx.settings.allow_raw_resources) if raw else schemas.http_update(features)
    changes: Row = schema.validate(ctx.body)
    nice_id = changes.get("niceId")
    if nice_id is not None and ctx.store.nice_id_taken(row["orgId"], str(nice_id), except_id=row["resourceId"]):
        raise ApiError(409, f'A resource with niceId "{nice_id}" already exists')
    if not raw and ("subdomain" in changes or "domainId" in changes):
        changes["fullDomain"] = _full_domain(ctx, row, changes)
    updated = ctx.store.update_resource(row["resourceId"], changes)
    data = resource_row(updated, features, echo=True)
    if not raw:
        return Reply(200, "HTTP resource updated successfully", data)
    if features.policies:
        data["skipToIdpId"] = None
    return Reply(200, "Non-http Resource updated successfully", data)


def _full_domain(ctx: Context, row: Row, changes: Row) -> str:
    domain_id = str(changes.get("domainId", row.get("domainId")))
    domain = ctx.store.get_org_domain(row["orgId"], domain_id)
    if domain is None:
        raise ApiError(404, "Domain not found")
    subdomain = changes.get("subdomain", row.get("subdomain"))
    return f"{subdomain}.{domain['baseDomain']}" if subdomain else str(domain["baseDomain"])


def delete_resource(ctx: Context) -> Reply:
    ctx.store.delete_resource(ctx.entities["resource"]["resourceId"])
    return Reply(200, "Resource deleted successfully", None)
