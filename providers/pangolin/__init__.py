"""Pangolin Integration API client and the `PangolinTcpResource` Pulumi dynamic resource.

The names below load on first use (PEP 562): the tools import the client and the errors through this package
(`ssh_gateway/ops/shared/pangolin_api.py`), and `ssh-gateway --help` must not load the Pulumi SDK, which the provider
and the resource import.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from .client import PangolinClient
    from .errors import (
        PangolinAuthError,
        PangolinConflict,
        PangolinError,
        PangolinNotFound,
        PangolinServerError,
        PangolinTransportError,
        PangolinValidationError,
    )
    from .provider import PangolinTcpProvider
    from .resource import PangolinTcpResource, PangolinTcpResourceArgs

__all__ = [
    "PangolinAuthError",
    "PangolinClient",
    "PangolinConflict",
    "PangolinError",
    "PangolinNotFound",
    "PangolinServerError",
    "PangolinTcpProvider",
    "PangolinTcpResource",
    "PangolinTcpResourceArgs",
    "PangolinTransportError",
    "PangolinValidationError",
]

_HOME: Final = {
    "PangolinClient": "client",
    "PangolinAuthError": "errors",
    "PangolinConflict": "errors",
    "PangolinError": "errors",
    "PangolinNotFound": "errors",
    "PangolinServerError": "errors",
    "PangolinTransportError": "errors",
    "PangolinValidationError": "errors",
    "PangolinTcpProvider": "provider",
    "PangolinTcpResource": "resource",
    "PangolinTcpResourceArgs": "resource",
}


def __getattr__(name: str) -> object:
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{_HOME[name]}", __name__), name)
