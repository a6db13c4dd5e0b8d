"""The Pangolin API key for dynamic providers: from `configure()`, never from pickled state.

The engine pickles a provider in the program, before `configure()` ever runs, and stores the pickle in
the stack's state as `__provider`. The key therefore arrives only in the provider process - from the
stack secret `pangolin:apiKey` through `configure()`, or from `PANGOLIN_API_KEY` at call time, in the
order `ssh_gateway.core.credentials` defines - and is dropped again if a configured provider is pickled.
"""

from __future__ import annotations

import os
from typing import Any

from pulumi import dynamic

from ssh_gateway.core.credentials import API_KEY_CONFIG, find_api_key

from .errors import PangolinAuthError


class ApiKeyFromConfig:
    """Mixin for `ResourceProvider`s that call Pangolin."""

    _api_key: str | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "_api_key"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._api_key = None

    def configure(self, req: dynamic.ConfigureRequest) -> None:
        """Take the API key from the stack secret `pangolin:apiKey`, if set."""
        key = req.config.get(API_KEY_CONFIG)
        if isinstance(key, str) and key:
            self._api_key = key

    def api_key(self) -> str:
        """The key, looked up in the one order every caller uses; an error naming both places if none."""
        try:
            key, _ = find_api_key({API_KEY_CONFIG: self._api_key or ""}, os.environ)
        except ValueError as exc:
            raise PangolinAuthError(str(exc), call="configure") from None
        return key
