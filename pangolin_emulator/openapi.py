"""The OpenAPI document served at `/v1/openapi.json` (contract §6.3).

A real server generates its document from every route it registers (206 paths in 1.22.0, see
shared/reference/pangolin-1.22.0-openapi.yaml). The emulator describes only the routes it serves,
in the same frame (OpenAPI 3.0.0, `servers: [{url: "/v1"}]`, a "Bearer Auth" scheme, paths without
the `/v1` prefix, the generic success envelope), so the document is true of this server and needs
no file at run time.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Protocol

from pangolin_emulator.versions import Features

__all__ = ["document"]

_BEARER = "Bearer Auth"
_STRING_PARAMS = ("orgId", "domainId")
"""Path parameters that are strings; every other `…Id` is a positive integer."""
_PUBLIC = (
    ("/", "Health check"),
    ("/openapi.json", "Get OpenAPI specification as JSON"),
    ("/openapi.yaml", "Get OpenAPI specification as YAML"),
)


class Route(Protocol):
    """What the document needs of a route (routes.py's `Route`; a Protocol, so routes.py, which serves the
    document, is not imported back)."""

    @property
    def method(self) -> str: ...
    @property
    def template(self) -> str: ...
    @property
    def action(self) -> str: ...


def _envelope() -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "data": {"type": "object", "nullable": True, "additionalProperties": {"nullable": True}},
            "success": {"type": "boolean"},
            "error": {"type": "boolean"},
            "message": {"type": "string"},
            "status": {"type": "number"},
        },
        "required": ["data", "success", "error", "message", "status"],
    }


def _parameter(name: str) -> dict[str, Any]:
    schema: dict[str, Any] = (
        {"type": "string"} if name in _STRING_PARAMS else {"type": "integer", "minimum": 0, "exclusiveMinimum": True}
    )
    return {"schema": schema, "required": True, "name": name, "in": "path"}


def _operation(route: Route) -> dict[str, Any]:
    # Every PUT the emulator serves creates something and answers 201; the rest answer 200.
    status = "201" if route.method == "PUT" else "200"
    return {
        "description": f"Pangolin action `{route.action}`.",
        "security": [{_BEARER: []}],
        "parameters": [_parameter(name) for name in re.findall(r"\{(\w+)\}", route.template)],
        "responses": {
            status: {
                "description": "Successful response",
                "content": {"application/json": {"schema": _envelope()}},
            }
        },
    }


def document(features: Features, routes: Sequence[Route]) -> dict[str, Any]:
    """The document for these routes plus the unauthenticated ones, which say `security: []`
    (a real 1.22.0 document claims bearer auth on `/openapi.json`, yet serves it without)."""
    paths: dict[str, dict[str, Any]] = {}
    for route in routes:
        paths.setdefault(route.template.removeprefix("/v1"), {})[route.method.lower()] = _operation(route)
    for path, description in _PUBLIC:
        paths[path] = {"get": {"description": description, "security": [], "responses": {"200": {"description": "OK"}}}}
    version = ".".join(str(part) for part in features.version)
    return {
        "openapi": "3.0.0",
        "info": {
            "version": "v1",
            "title": "Pangolin Integration API",
            "description": f"The routes pangolin_emulator serves, emulating Pangolin {version}.",
        },
        "servers": [{"url": "/v1"}],
        "components": {"securitySchemes": {_BEARER: {"type": "http", "scheme": "bearer"}}},
        "paths": dict(sorted(paths.items())),
    }
