"""Which Pangolin behaviours apply to the emulated server version."""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Features", "parse_version"]

Version = tuple[int, int, int]

# Below 1.13 zod v3 wrote different error texts; above 1.22 no tree was examined (contract §0).
MIN_VERSION: Version = (1, 13, 0)
MAX_VERSION: Version = (1, 22, 99)

_VERSION_RE = re.compile(r"^(\d+)\.(\d+)\.(\d+)$")


def parse_version(text: str) -> Version:
    """Parse "1.22.0" into (1, 22, 0), rejecting versions the emulator does not model."""
    match = _VERSION_RE.match(text.strip())
    if match is None:
        raise ValueError(f"version {text!r} is not of the form MAJOR.MINOR.PATCH")
    version = (int(match[1]), int(match[2]), int(match[3]))
    if not MIN_VERSION <= version <= MAX_VERSION:
        raise ValueError(f"version {text!r} is outside the emulated range 1.13.0 .. 1.22.x")
    return version


@dataclass(frozen=True)
class Features:
    """Version-dependent switches, each named after what changed (contract §6.1)."""

    version: Version

    @property
    def mode_model(self) -> bool:
        """1.19: `mode` replaces `http`/`protocol` in rows; requests accept both dialects."""
        return self.version >= (1, 19, 0)

    @property
    def page_pagination(self) -> bool:
        """1.16: resource and site lists use page/pageSize instead of limit/offset."""
        return self.version >= (1, 16, 0)

    @property
    def openapi_routes(self) -> bool:
        """1.17: unauthenticated `GET /v1/openapi.json` and `/v1/openapi.yaml` (contract §1.1, §6.1)."""
        return self.version >= (1, 17, 0)

    @property
    def resource_list_sites(self) -> bool:
        """Resource list items carry `sites` (observed on 1.18.4 and 1.22.0, issue 11). An earlier
        1.16-era upstream tree has no such key; the first version with it is not known, so the
        emulator assumes 1.18.0."""
        return self.version >= (1, 18, 0)

    @property
    def strict_list_query(self) -> bool:
        """1.20: unknown query keys on list routes are rejected."""
        return self.version >= (1, 20, 0)

    @property
    def strict_domain_query(self) -> bool:
        """Domain list query is strict "at least since 1.16" (contract §4.2)."""
        return self.version >= (1, 16, 0)

    @property
    def public_aliases(self) -> bool:
        """1.21: `/public-resource…` aliases for every resource path."""
        return self.version >= (1, 21, 0)

    @property
    def update_proxy_protocol(self) -> bool:
        """1.12: raw update accepts proxyProtocol and proxyProtocolVersion."""
        return self.version >= (1, 12, 0)

    @property
    def update_nice_id(self) -> bool:
        """1.13: raw update accepts niceId."""
        return self.version >= (1, 13, 0)

    @property
    def policies(self) -> bool:
        """1.22 rows: raw create/update echo null auth fields, updates accept resourcePolicyId,
        list items carry integer sso/whitelist, site info on targets and labels, targets gain
        mode/authToken/providerId."""
        return self.version >= (1, 22, 0)

    @property
    def list_query_protocol(self) -> bool:
        """1.22: resource list accepts protocol, status and labels filters."""
        return self.version >= (1, 22, 0)
