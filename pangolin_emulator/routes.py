"""The emulated `/v1` route table, by version (contract §1.1, §2.1, §3, §4)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import unquote

from pangolin_emulator import catalog, openapi, resources, targets
from pangolin_emulator.auth import Access
from pangolin_emulator.context import Context, Reply
from pangolin_emulator.versions import Features

__all__ = ["HEALTH_ROUTE", "Route", "Router"]

Handler = Callable[[Context], Reply]
HEALTH_ROUTE = "GET /v1/"


def _compile(template: str) -> re.Pattern[str]:
    regex = re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>[^/]+)", re.escape(template))
    # Express matches with or without one trailing slash.
    return re.compile(f"^{regex}/?$")


@dataclass(frozen=True)
class _Endpoint:
    """A method and a path template, matched as Express matches them."""

    method: str
    template: str
    """Path with `{param}` placeholders, e.g. "/v1/resource/{resourceId}"."""
    pattern: re.Pattern[str] = field(init=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "pattern", _compile(self.template))

    @property
    def key(self) -> str:
        """The counter key, e.g. "PUT /v1/org/{orgId}/resource"."""
        return f"{self.method} {self.template}"


@dataclass(frozen=True)
class Route(_Endpoint):
    """A route behind verifyApiKey, an access middleware and an action check."""

    access: Access
    action: str
    handler: Handler


@dataclass(frozen=True)
class PublicRoute(_Endpoint):
    """A route mounted before verifyApiKey that serves a fixed document (contract §1.1)."""

    content_type: str
    body: bytes


def _resource_routes(prefix: str) -> list[Route]:
    """Routes that exist under both `/resource…` and, from 1.21, `/public-resource…`."""
    r, t = resources, targets
    return [
        Route("PUT", f"/v1/org/{{orgId}}/{prefix}", Access.ORG, "createResource", r.create_resource),
        Route("GET", f"/v1/org/{{orgId}}/{prefix}s", Access.ORG, "listResources", r.list_resources),
        Route("GET", f"/v1/org/{{orgId}}/{prefix}-names", Access.ORG, "listResources", r.list_resource_names),
        Route("GET", f"/v1/{prefix}/{{resourceId}}", Access.RESOURCE, "getResource", r.get_resource),
        Route("POST", f"/v1/{prefix}/{{resourceId}}", Access.RESOURCE, "updateResource", r.update_resource),
        Route("DELETE", f"/v1/{prefix}/{{resourceId}}", Access.RESOURCE, "deleteResource", r.delete_resource),
        Route("PUT", f"/v1/{prefix}/{{resourceId}}/target", Access.RESOURCE, "createTarget", t.create_target),
        Route("GET", f"/v1/{prefix}/{{resourceId}}/targets", Access.RESOURCE, "listTargets", t.list_targets),
    ]


def build_routes(features: Features) -> list[Route]:
    t, c = targets, catalog
    table = _resource_routes("resource")
    if features.public_aliases:
        table += _resource_routes("public-resource")
    return [
        *table,
        Route("GET", "/v1/target/{targetId}", Access.TARGET, "getTarget", t.get_target),
        Route("POST", "/v1/target/{targetId}", Access.TARGET, "updateTarget", t.update_target),
        Route("DELETE", "/v1/target/{targetId}", Access.TARGET, "deleteTarget", t.delete_target),
        Route("GET", "/v1/org/{orgId}/sites", Access.ORG, "listSites", c.list_sites),
        Route("GET", "/v1/site/{siteId}", Access.SITE, "getSite", c.get_site),
        Route("GET", "/v1/org/{orgId}/domains", Access.ORG, "listOrgDomains", c.list_domains),
        Route("GET", "/v1/org/{orgId}/domain/{domainId}", Access.DOMAIN, "getDomain", c.get_domain),
        Route("GET", "/v1/orgs", Access.ROOT, "listOrgs", c.list_orgs),
    ]


def build_public_routes(features: Features, routes: list[Route]) -> list[PublicRoute]:
    """`/v1/openapi.json` and `/v1/openapi.yaml` from 1.17: a document of the routes the emulator
    serves. The YAML route sends the same JSON text, which is also valid YAML 1.2."""
    if not features.openapi_routes:
        return []
    text = json.dumps(openapi.document(features, routes), indent=2).encode()
    return [
        PublicRoute("GET", "/v1/openapi.json", "application/json; charset=utf-8", text),
        PublicRoute("GET", "/v1/openapi.yaml", "application/yaml; charset=utf-8", text),
    ]


class Router:
    """Finds the route for a method and path, decoding path parameters like Express."""

    def __init__(self, features: Features) -> None:
        self.routes = build_routes(features)
        self.public = build_public_routes(features, self.routes)

    def match_public(self, method: str, path: str) -> PublicRoute | None:
        """The unauthenticated route for a method and path, if there is one."""
        return next((r for r in self.public if r.method == method and r.pattern.match(path)), None)

    def match(self, method: str, path: str) -> tuple[Route, dict[str, str]] | None:
        for route in self.routes:
            if route.method != method:
                continue
            found = route.pattern.match(path)
            if found is not None:
                return route, {name: unquote(value) for name, value in found.groupdict().items()}
        return None
