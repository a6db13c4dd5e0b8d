"""What a route handler receives and returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pangolin_emulator.store import Row, Store
from pangolin_emulator.versions import Features

__all__ = ["Context", "Query", "Reply", "Settings"]

Query = dict[str, str | list[str]]


@dataclass(frozen=True)
class Settings:
    """Server-wide behaviour that does not change per request."""

    features: Features
    allow_raw_resources: bool
    """Pangolin's `flags.allow_raw_resources`."""


@dataclass
class Context:
    """One authenticated, authorised request on its way to a handler."""

    store: Store
    settings: Settings
    params: dict[str, str]
    query: Query
    body: object
    """The parsed JSON body, or UNDEFINED where express would leave `req.body` undefined."""
    key: Row
    entities: dict[str, Row] = field(default_factory=dict)
    """Objects the access check already loaded: "resource", "target", "site", "domain"."""
    org_id: str = ""
    """The org the access check authorised."""

    @property
    def features(self) -> Features:
        return self.settings.features


@dataclass(frozen=True)
class Reply:
    """A success envelope: `{data, success: true, error: false, message, status}`."""

    status: int
    message: str
    data: Any
