"""Response bodies shaped like each version's rows (contract §2.2, §2.6, §3, §4).

The store keeps one neutral row per object (`mode` always, never `http`/`protocol`); these
functions turn it into what the emulated version would send.
"""

from __future__ import annotations

from typing import Any

from pangolin_emulator.store import Row
from pangolin_emulator.versions import Features

__all__ = [
    "domain_row",
    "resource_list_item",
    "resource_row",
    "site_list_item",
    "site_row",
    "target_list_item",
    "target_row",
]

RAW_MODES = ("tcp", "udp")
SITE_STATUS = "approved"
"""Every emulated site's status: none awaits approval (`/site/{id}/approve` is not emulated)."""

# Column order of the 1.18.4 create response; 1.19+ inserts policy ids and appends mode fields.
_RESOURCE_HEAD = ("resourceId", "resourceGuid", "orgId", "niceId", "name", "subdomain", "fullDomain",
                  "domainId", "ssl", "blockAccess", "sso")  # fmt: skip
_RESOURCE_TAIL = ("proxyPort", "emailWhitelistEnabled", "applyRules", "enabled", "stickySession",
                  "tlsServerName", "setHostHeader", "enableProxy", "skipToIdpId", "headers",
                  "proxyProtocol", "proxyProtocolVersion", "maintenanceModeEnabled", "maintenanceModeType",
                  "maintenanceTitle", "maintenanceMessage", "maintenanceEstimatedTime", "postAuthPath",
                  "health", "wildcard")  # fmt: skip
_MODE_FIELDS = ("mode", "pamMode", "authDaemonMode", "authDaemonPort", "status")

_TARGET_FIELDS = ("targetId", "resourceId", "siteId", "ip", "method", "port", "internalPort", "enabled",
                  "path", "pathMatchType", "rewritePath", "rewritePathType", "priority")  # fmt: skip
_TARGET_122 = ("mode", "authToken", "providerId")
_HC_FIELDS = ("hcEnabled", "hcPath", "hcScheme", "hcMode", "hcHostname", "hcPort", "hcInterval",
              "hcUnhealthyInterval", "hcTimeout", "hcHeaders", "hcFollowRedirects", "hcMethod", "hcStatus",
              "hcHealth", "hcTlsServerName", "hcHealthyThreshold", "hcUnhealthyThreshold")  # fmt: skip
_HEALTH_FIELDS = ("targetHealthCheckId", *_HC_FIELDS, "orgId", "name")
_PATH_FIELDS = ("path", "pathMatchType", "rewritePath", "rewritePathType", "priority")


def _legacy_fields(mode: str) -> dict[str, Any]:
    """1.18 columns: `http` is false only for raw modes; `protocol` is "tcp" for HTTP resources."""
    return {"http": mode not in RAW_MODES, "protocol": mode if mode in RAW_MODES else "tcp"}


def is_raw(row: Row) -> bool:
    return row["mode"] in RAW_MODES


def resource_row(row: Row, features: Features, *, echo: bool = False) -> dict[str, Any]:
    """A resource as create/update/get return it. `echo` marks create/update responses, where
    1.22 shows null auth fields for raw resources (they come from the policy on GET)."""
    out: dict[str, Any] = {"resourceId": row["resourceId"]}
    if features.mode_model:
        out |= {
            "resourcePolicyId": row.get("resourcePolicyId"),
            "defaultResourcePolicyId": row.get("defaultResourcePolicyId"),
        }
    out |= {key: row.get(key) for key in _RESOURCE_HEAD[1:]}
    if not features.mode_model:
        out |= _legacy_fields(row["mode"])
    out |= {key: row.get(key) for key in _RESOURCE_TAIL}
    if features.mode_model:
        out |= {key: row.get(key) for key in _MODE_FIELDS}
    if echo and features.policies and is_raw(row):
        out |= {"sso": None, "emailWhitelistEnabled": None, "applyRules": None}
    return out


def _list_target(target: Row, site: Row | None, features: Features) -> dict[str, Any]:
    item = {
        "targetId": target["targetId"],
        "resourceId": target["resourceId"],
        "siteId": target["siteId"],
        "ip": target["ip"],
        "port": target["port"],
        "enabled": target["enabled"],
        "healthStatus": target.get("hcHealth", "unknown"),
        "hcEnabled": bool(target.get("hcEnabled")),
    }
    if features.policies and site is not None:
        item |= {
            "siteName": site["name"],
            "siteNiceId": site["niceId"],
            "siteOnline": True,
            "siteType": site["type"],
        }
    return item


def resource_list_item(row: Row, targets: list[Row], sites: dict[int, Row], features: Features) -> dict[str, Any]:
    """One entry of GET /org/{orgId}/resources."""
    as_flag: type[int] | type[bool] = int if features.policies else bool
    item: dict[str, Any] = {
        "resourceId": row["resourceId"],
        "niceId": row["niceId"],
        "name": row["name"],
        "ssl": row.get("ssl", False),
        "fullDomain": row.get("fullDomain"),
        "passwordId": None,
        "sso": as_flag(bool(row.get("sso"))),
        "pincodeId": None,
        "whitelist": as_flag(bool(row.get("emailWhitelistEnabled"))),
    }
    if not features.mode_model:
        item |= _legacy_fields(row["mode"])
    item |= {"proxyPort": row.get("proxyPort"), "wildcard": row.get("wildcard", False)}
    if features.mode_model:
        item["mode"] = row["mode"]
    item |= {
        "enabled": row["enabled"],
        "domainId": row.get("domainId"),
        "headerAuthId": None,
        "health": row.get("health", "unknown"),
        "targets": [_list_target(t, sites.get(t["siteId"]), features) for t in targets],
    }
    if features.resource_list_sites:
        used = {t["siteId"]: sites[t["siteId"]] for t in targets if t["siteId"] in sites}
        # Pangolin adds `online` for non-local sites only; the emulator has local sites only.
        item["sites"] = [
            {"siteId": s["siteId"], "siteName": s["name"], "siteNiceId": s["niceId"]} for s in used.values()
        ]
    if features.policies:
        item["labels"] = []
    return item


def target_row(target: Row, org_id: str, features: Features) -> dict[str, Any]:
    """The merged target + health-check row that create/get/update return."""
    merged = {**target, "orgId": org_id, "targetHealthCheckId": target["targetId"]}
    keys = _TARGET_FIELDS + (_TARGET_122 if features.policies else ()) + _HEALTH_FIELDS
    return {key: merged.get(key) for key in keys}


def target_list_item(target: Row, site: Row | None, features: Features) -> dict[str, Any]:
    """One entry of GET /resource/{id}/targets: the target joined with its site's type and name and
    its health-check columns. Unlike the create/get/update row it has no internalPort, orgId, name,
    targetHealthCheckId or authToken (observed on 1.18.4 and 1.22.0, issue 11); 1.22 adds mode and
    providerId. Keys in the order of upstream's select."""
    item: dict[str, Any] = {"targetId": target["targetId"], "ip": target["ip"]}
    if features.policies:
        item["mode"] = target.get("mode")
    item |= {key: target.get(key) for key in ("method", "port", "enabled", "resourceId")}
    if features.policies:
        item["providerId"] = target.get("providerId")
    item |= {
        "siteId": target["siteId"],
        "siteType": site["type"] if site else None,
        "siteName": site["name"] if site else None,
    }
    item |= {key: target.get(key) for key in (*_HC_FIELDS, *_PATH_FIELDS)}
    return item


def site_row(site: Row) -> dict[str, Any]:
    """GET /site/{id}: upstream's getSite returns the whole `sites` row, so `online` and `subnet`
    stay here although list items drop them, and `status` is here because the list selects it
    from this same row (observed in list items on 1.18.4 and 1.22.0, issue 11)."""
    return {
        "siteId": site["siteId"],
        "orgId": site["orgId"],
        "niceId": site["niceId"],
        "exitNodeId": None,
        "name": site["name"],
        "pubKey": None,
        "subnet": None,
        "megabytesIn": 0,
        "megabytesOut": 0,
        "lastBandwidthUpdate": None,
        "type": site["type"],
        "online": True,
        "address": None,
        "endpoint": None,
        "publicKey": None,
        "listenPort": None,
        "dockerSocketEnabled": True,
        "status": SITE_STATUS,
    }


def site_list_item(site: Row, org_name: str, resource_count: int, features: Features) -> dict[str, Any]:
    """One entry of GET /org/{orgId}/sites (observed on 1.18.4 and 1.22.0, issue 11): the site
    joined with its exit node (name, endpoint, remote exit node id), `status` and
    `newtUpdateAvailable`, `labels` from 1.22; no `subnet`, and no `online` for a local site (the
    only kind the emulator has; Pangolin drops the key for local sites)."""
    item: dict[str, Any] = {
        "siteId": site["siteId"],
        "niceId": site["niceId"],
        "name": site["name"],
        "pubKey": None,
        "megabytesIn": 0,
        "megabytesOut": 0,
        "orgName": org_name,
        "type": site["type"],
        "address": None,
        "newtVersion": None,
        "exitNodeId": None,
        "exitNodeName": None,
        "exitNodeEndpoint": None,
        "remoteExitNodeId": None,
        "resourceCount": resource_count,
        "status": SITE_STATUS,
        "newtUpdateAvailable": False,
    }
    if features.policies:
        item["labels"] = []
    return item


def domain_row(domain: Row) -> dict[str, Any]:
    return {
        "domainId": domain["domainId"],
        "baseDomain": domain["baseDomain"],
        "verified": domain["verified"],
        "type": domain["type"],
        "failed": False,
        "tries": 0,
        "configManaged": True,
        "certResolver": None,
        "preferWildcardCert": None,
        "errorMessage": None,
    }
