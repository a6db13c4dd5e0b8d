"""The Pangolin API key for dynamic providers: from `configure()`, never from pickled state.

The engine pickles a provider in the program, before `configure()` ever runs, and stores the pickle in
the stack's state as `__provider`. The key therefore arrives only in the provider process - from the
stack secret `pangolin:apiKey` through `configure()`, or from `PANGOLIN_API_KEY` at call time - and is
dropped again if a configured provider is ever pickled.
"""

from __future__ import annotations

import os
from typing import Any, Final

from pulumi.dynamic import ConfigureRequest

from .errors import PangolinAuthError

API_KEY_CONFIG: Final = "pangolin:apiKey"
API_KEY_ENV: Final = "PANGOLIN_API_KEY"


class ApiKeyFromConfig:
    """Mixin for `ResourceProvider`s that call Pangolin."""

    _api_key: str | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "_api_key"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._api_key = None

    def configure(self, req: ConfigureRequest) -> None:
        """Take the API key from the stack secret `pangolin:apiKey`, if set."""
        key = req.config.get(API_KEY_CONFIG)
        if isinstance(key, str) and key:
            self._api_key = key

    def api_key(self) -> str:
        """The configured key, else `PANGOLIN_API_KEY`; an error naming both places when neither is set."""
        key = self._api_key or os.environ.get(API_KEY_ENV)
        if not key:
            raise PangolinAuthError(
                f"No Pangolin API key: set the stack secret `{API_KEY_CONFIG}` "
                f"(pulumi config set --secret {API_KEY_CONFIG} <keyId>.<secret>) "
                f"or the environment variable {API_KEY_ENV}.",
                call="configure",
            )
        return key
