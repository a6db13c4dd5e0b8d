"""Pangolin Integration API client and the `PangolinTcpResource` Pulumi dynamic resource."""

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
