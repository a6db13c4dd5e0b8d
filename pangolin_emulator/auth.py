"""API-key authentication and the per-route access checks, in Pangolin's order (contract §1.3,
§8 item 3): 401 key → 404 entity → 403 org (or root) → 403 action. Validation (400) comes after."""

from __future__ import annotations

import enum
import math

from pangolin_emulator.errors import ApiError, not_found
from pangolin_emulator.keys import secret_matches, split_token
from pangolin_emulator.store import Row, Store

__all__ = ["ORG_ACTIONS", "ROOT_ACTIONS", "Access", "authenticate", "authorise"]

ORG_ACTIONS = (
    "createResource", "getResource", "listResources", "updateResource", "deleteResource",
    "createTarget", "getTarget", "listTargets", "updateTarget", "deleteTarget",
    "listSites", "getSite", "createSite", "updateSite", "deleteSite",
    "listOrgDomains", "getDomain",
)  # fmt: skip
ROOT_ACTIONS = (*ORG_ACTIONS, "listOrgs", "createOrg", "createApiKey", "setApiKeyActions",
                "listApiKeyActions", "deleteApiKey")  # fmt: skip

NO_ORG_ACCESS = "Key does not have access to this organization"
NO_ROOT_ACCESS = "Key does not have root access"
NO_ACTION = "Key does not have permission perform this action"  # sic


class Access(enum.Enum):
    """Which verifyApiKey*Access middleware guards a route."""

    ORG = "org"
    RESOURCE = "resource"
    TARGET = "target"
    SITE = "site"
    DOMAIN = "domain"
    ROOT = "root"
    """verifyApiKeyIsRoot: root keys only, whatever their org links (contract §1.3)."""


def authenticate(store: Store, header: str | None) -> Row:
    """verifyApiKey: the key row, or the 401/500 Pangolin answers."""
    if header is None or not header.startswith("Bearer "):
        raise ApiError(401, "API key required")
    key_id, secret = split_token(header.split(" ")[1])
    key = store.get_key(key_id)
    if key is None:
        raise ApiError(401, "Invalid API key")
    if secret is None:
        # argon2.verify(hash, undefined) throws inside the middleware (Addendum 2).
        raise ApiError(500, "An error occurred checking API key")
    if not secret_matches(secret, key["secretHash"]):
        raise ApiError(401, "Invalid API key")
    return key


def _js_id(raw: str) -> int | None:
    """`Number(req.params.x)` for an id lookup: None when no row could match."""
    try:
        number = float(raw) if raw.strip() else 0.0
    except ValueError:
        return None
    return int(number) if math.isfinite(number) and number.is_integer() else None


def _lookup(store: Store, kind: str, raw: str) -> Row:
    number = _js_id(raw)
    getter = {"Resource": store.get_resource, "Target": store.get_target, "Site": store.get_site}[kind]
    row = getter(number) if number is not None else None
    if row is None:
        raise not_found(kind, raw)
    return row


def _check_org(store: Store, key: Row, org_id: str) -> None:
    if not key["isRoot"] and not store.key_in_org(key["apiKeyId"], org_id):
        raise ApiError(403, NO_ORG_ACCESS)


def authorise(
    store: Store, key: Row, access: Access, action: str, params: dict[str, str]
) -> tuple[str, dict[str, Row]]:
    """Run the access middleware then verifyApiKeyHasAction; return (orgId, loaded entities).

    Root routes have no org, so their orgId is ""."""
    entities: dict[str, Row] = {}
    if access is Access.ROOT:
        if not key["isRoot"]:
            raise ApiError(403, NO_ROOT_ACCESS)
        _check_action(store, key, action)
        return "", entities
    if access is Access.RESOURCE:
        entities["resource"] = _lookup(store, "Resource", params["resourceId"])
        org_id = str(entities["resource"]["orgId"])
    elif access is Access.TARGET:
        entities["target"] = _lookup(store, "Target", params["targetId"])
        resource = store.get_resource(entities["target"]["resourceId"])
        if resource is None:
            raise not_found("Resource", entities["target"]["resourceId"])
        org_id = str(resource["orgId"])
    elif access is Access.SITE:
        entities["site"] = _lookup(store, "Site", params["siteId"])
        org_id = str(entities["site"]["orgId"])
    else:
        org_id = params["orgId"]
    _check_org(store, key, org_id)
    if access is Access.DOMAIN:
        domain = store.get_org_domain(org_id, params["domainId"])
        if domain is None:
            raise not_found("Domain", params["domainId"])
        entities["domain"] = domain
    _check_action(store, key, action)
    return org_id, entities


def _check_action(store: Store, key: Row, action: str) -> None:
    if not store.key_has_action(key["apiKeyId"], action):
        raise ApiError(403, NO_ACTION)
