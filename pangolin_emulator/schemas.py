"""Request schemas of the emulated routes, per version (contract §2.2, §2.5, §2.6, §3 and the
1.22.0 OpenAPI document, whose request schemas are the handlers' own zod objects)."""

from __future__ import annotations

import ipaddress
import re

from pangolin_emulator.validation import (
    Arr,
    Bool,
    CoerceNum,
    Enum,
    Int,
    Issue,
    Num,
    Obj,
    Schema,
    Str,
)
from pangolin_emulator.versions import Features

__all__ = [
    "domain_list_query",
    "http_create",
    "http_update",
    "org_list_query",
    "raw_create",
    "raw_update",
    "resource_list_query",
    "site_list_query",
    "target_body",
    "target_list_query",
]

RAW_MODES = ("tcp", "udp")
ALL_MODES = ("http", "ssh", "rdp", "vnc", "tcp", "udp", "inference")
_HOSTNAME = re.compile(
    r"^(?=.{1,253}$)([A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9])?)(\.[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9])?)*\.?$"
)


def is_target_valid(value: str) -> bool:
    """Pangolin's isTargetValid: an IPv4/IPv6 address or a hostname."""
    try:
        ipaddress.ip_address(value.strip("[]"))
    except ValueError:
        return _HOSTNAME.match(value) is not None
    return True


def _name(optional: bool = False) -> Str:
    return Str(min_len=1, max_len=255, optional=optional)


def _port(optional: bool = False) -> Int:
    return Int(lo=1, hi=65535, optional=optional)


def _at_least_one(parsed: dict[str, object]) -> Issue | None:
    return None if parsed else Issue("At least one field must be provided for update")


def raw_create(features: Features) -> Obj:
    """createRawResourceSchema; the mode check is a refine the caller adds (it needs the flag)."""
    if not features.mode_model:
        return Obj(
            fields={
                "name": _name(),
                "http": Bool(),
                "protocol": Enum(values=RAW_MODES),
                "proxyPort": _port(),
            }
        )
    return Obj(
        fields={
            "name": _name(),
            "http": Bool(optional=True),
            "protocol": Enum(values=RAW_MODES, optional=True),
            "mode": Enum(values=RAW_MODES, optional=True),
            "proxyPort": _port(),
        }
    )


def http_create(features: Features) -> Obj:
    """createHttpResourceSchema. Only validated and stored: the emulator does not serve HTTP."""
    fields: dict[str, Schema] = {
        "name": _name(),
        "subdomain": Str(optional=True, nullable=True),
        "http": Bool(optional=features.mode_model),
        "protocol": Enum(values=RAW_MODES, optional=features.mode_model),
        "domainId": Str(),
        "stickySession": Bool(optional=True),
        "postAuthPath": Str(optional=True, nullable=True),
    }
    if features.mode_model:
        fields |= {
            "mode": Enum(values=ALL_MODES, optional=True),
            "pamMode": Enum(values=("passthrough", "push"), optional=True),
            "authDaemonPort": Int(gt=0, optional=True),
            "authDaemonMode": Enum(values=("site", "remote", "native"), optional=True),
        }
    return Obj(fields=fields)


def raw_update(features: Features, allow_raw: bool) -> Obj:
    """updateRawResourceBodySchema (contract §2.5 table)."""
    fields: dict[str, Schema] = {"name": _name(optional=True)}
    if features.update_nice_id:
        fields["niceId"] = _name(optional=True)
    fields |= {
        "proxyPort": _port(optional=True),
        "stickySession": Bool(optional=True),
        "enabled": Bool(optional=True),
    }
    if features.update_proxy_protocol:
        fields |= {"proxyProtocol": Bool(optional=True), "proxyProtocolVersion": Int(lo=1, optional=True)}
    if features.policies:
        fields["resourcePolicyId"] = Num(optional=True, nullable=True)

    def port_allowed(parsed: dict[str, object]) -> Issue | None:
        return None if allow_raw or "proxyPort" not in parsed else Issue("Cannot update proxyPort")

    return Obj(fields=fields, refines=(_at_least_one, port_allowed))


def http_update(features: Features) -> Obj:
    """updateHttpResourceBodySchema, as published in the 1.22.0 OpenAPI document."""
    header = Obj(fields={"name": Str(), "value": Str()})
    fields: dict[str, Schema] = {
        "name": _name(optional=True),
        "niceId": Str(min_len=1, max_len=255, pattern="^[a-zA-Z0-9-]+$", optional=True),
        "subdomain": Str(optional=True, nullable=True),
        "ssl": Bool(optional=True),
        "sso": Bool(optional=True),
        "blockAccess": Bool(optional=True),
        "emailWhitelistEnabled": Bool(optional=True),
        "applyRules": Bool(optional=True),
        "domainId": Str(optional=True),
        "enabled": Bool(optional=True),
        "stickySession": Bool(optional=True),
        "tlsServerName": Str(optional=True, nullable=True),
        "setHostHeader": Str(optional=True, nullable=True),
        "skipToIdpId": Int(gt=0, optional=True, nullable=True),
        "headers": Arr(item=header, optional=True, nullable=True),
        "maintenanceModeEnabled": Bool(optional=True),
        "maintenanceModeType": Enum(values=("forced", "automatic"), optional=True),
        "maintenanceTitle": Str(max_len=255, optional=True, nullable=True),
        "maintenanceMessage": Str(max_len=2000, optional=True, nullable=True),
        "maintenanceEstimatedTime": Str(max_len=100, optional=True, nullable=True),
        "postAuthPath": Str(optional=True, nullable=True),
    }
    if features.mode_model:
        fields |= {
            "pamMode": Enum(values=("passthrough", "push"), optional=True),
            "authDaemonMode": Enum(values=("site", "remote", "native"), optional=True),
            "authDaemonPort": Int(lo=1, hi=65535, optional=True, nullable=True),
        }
    if features.policies:
        fields["resourcePolicyId"] = Num(optional=True, nullable=True)
    return Obj(fields=fields, refines=(_at_least_one,))


def _health_check_fields() -> dict[str, Schema]:
    def positive() -> Int:
        return Int(gt=0, optional=True, nullable=True)

    def above_one() -> Int:
        return Int(gt=1, optional=True, nullable=True)

    return {
        "hcEnabled": Bool(optional=True, nullable=True),
        "hcPath": Str(min_len=1, optional=True, nullable=True),
        "hcScheme": Str(optional=True, nullable=True),
        "hcMode": Str(optional=True, nullable=True),
        "hcHostname": Str(optional=True, nullable=True),
        "hcPort": positive(),
        "hcInterval": above_one(),
        "hcUnhealthyInterval": above_one(),
        "hcTimeout": above_one(),
        "hcHeaders": Arr(item=Obj(fields={"name": Str(), "value": Str()}), optional=True, nullable=True),
        "hcFollowRedirects": Bool(optional=True, nullable=True),
        "hcMethod": Str(min_len=1, optional=True, nullable=True),
        "hcStatus": Int(optional=True, nullable=True),
        "hcTlsServerName": Str(optional=True, nullable=True),
        "hcHealthyThreshold": above_one(),
        "hcUnhealthyThreshold": above_one(),
    }


def target_body(features: Features, *, update: bool) -> Obj:
    """createTargetSchema / updateTargetBodySchema: siteId and ip are required by both."""
    match_types = ("exact", "prefix", "regex")
    fields: dict[str, Schema] = {
        "siteId": Int(gt=0),
        "ip": Str(refine=is_target_valid),
    }
    if features.policies:
        fields["mode"] = Enum(values=("http", "tcp", "udp", "ssh", "rdp", "vnc"), optional=True, nullable=update)
    fields |= {
        "method": Str(min_len=1 if update else None, max_len=10 if update else None, optional=True, nullable=True),
        "port": _port(optional=update),
        "enabled": Bool(optional=True) if update else Bool(default=True),
        **_health_check_fields(),
        "path": Str(optional=True, nullable=True),
        "pathMatchType": Enum(values=match_types, optional=True, nullable=True),
        "rewritePath": Str(optional=True, nullable=True),
        "rewritePathType": Enum(values=(*match_types, "stripPrefix"), optional=True, nullable=True),
        "priority": Int(lo=1, hi=1000, optional=True, nullable=not update),
    }
    return Obj(fields=fields)


def _query(fields: dict[str, Schema], strict: bool) -> Obj:
    return Obj(fields=fields, strict=strict)


def _limit_offset() -> dict[str, Schema]:
    return {"limit": CoerceNum(lo=0, default=1000), "offset": CoerceNum(lo=0, default=0)}


def _page_fields() -> dict[str, Schema]:
    # pageSize=0 is silently replaced by 20 later (Addendum 4), so 0 passes here.
    return {
        "pageSize": CoerceNum(lo=0, default=20),
        "page": CoerceNum(lo=0, default=1),
        "query": Str(optional=True),
    }


def _bool_query() -> Enum:
    return Enum(values=("true", "false"), optional=True)


def resource_list_query(features: Features) -> Obj:
    if not features.page_pagination:
        return _query(_limit_offset(), strict=False)
    fields = _page_fields() | {
        "sort_by": Enum(values=("name",), optional=True),
        "order": Enum(values=("asc", "desc"), default="asc"),
        "enabled": _bool_query(),
        "authState": Enum(values=("protected", "not_protected", "none"), optional=True),
        "healthStatus": Enum(values=("healthy", "degraded", "offline", "unknown"), optional=True),
        "siteId": CoerceNum(optional=True),
    }
    if features.list_query_protocol:
        fields |= {
            "protocol": Enum(values=("http", "https", *ALL_MODES[1:]), optional=True),
            "status": Enum(values=("pending", "approved"), optional=True),
            "labels": Str(optional=True),
        }
    return _query(fields, strict=features.strict_list_query)


def site_list_query(features: Features) -> Obj:
    if not features.page_pagination:
        return _query(_limit_offset(), strict=False)
    fields = _page_fields() | {
        "sort_by": Enum(values=("name", "megabytesIn", "megabytesOut"), optional=True),
        "order": Enum(values=("asc", "desc"), default="asc"),
        "online": _bool_query(),
        "status": Enum(values=("pending", "approved"), optional=True),
        "labels": Str(optional=True),
    }
    return _query(fields, strict=features.strict_list_query)


def target_list_query(features: Features) -> Obj:
    return _query(_limit_offset(), strict=features.strict_list_query)


def domain_list_query(features: Features) -> Obj:
    return _query(_limit_offset(), strict=features.strict_domain_query)


def org_list_query(features: Features) -> Obj:
    """listOrgs: `limit` (default "1000", must be > 0) and `offset` (default "0"); strict from 1.20
    like the other list queries (contract §6.1)."""
    fields: dict[str, Schema] = {"limit": CoerceNum(gt=0, default=1000), "offset": CoerceNum(lo=0, default=0)}
    return _query(fields, strict=features.strict_list_query)
