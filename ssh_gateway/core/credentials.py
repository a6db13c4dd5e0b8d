"""The Pangolin API key: where it is looked up (one order, for every caller), and its form.

Order: the stack secret `pangolin:apiKey` (`pulumi config set --secret`), then the environment variable
`PANGOLIN_API_KEY` (CI). The key is never shown: messages name where it came from, never its value.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

__all__ = ["API_KEY_CONFIG", "API_KEY_ENV", "MissingApiKey", "check_api_key", "find_api_key"]

API_KEY_CONFIG: Final = "pangolin:apiKey"
API_KEY_ENV: Final = "PANGOLIN_API_KEY"

# `<apiKeyId>.<secret>`: the id is lowercase letters and digits (15 on real servers), the secret follows
# the first '.' (Pangolin splits the token on '.', docs/pangolin-api.md §1.2).
_FORM: Final = re.compile(r"[a-z0-9]{1,64}\.[A-Za-z0-9]{1,256}")


class MissingApiKey(ValueError):
    """Neither place holds a key."""


def find_api_key(config: Mapping[str, str], env: Mapping[str, str]) -> tuple[str, str]:
    """The key and where it was found (`pangolin:apiKey` or `PANGOLIN_API_KEY`), checked for its form."""
    for source, key in ((API_KEY_CONFIG, config.get(API_KEY_CONFIG)), (API_KEY_ENV, env.get(API_KEY_ENV))):
        if key:
            check_api_key(key, source)
            return key, source
    raise MissingApiKey(
        f"no Pangolin API key: set the stack secret {API_KEY_CONFIG} "
        f"(pulumi config set --secret {API_KEY_CONFIG} <keyId>.<secret>) or the environment variable {API_KEY_ENV}"
    )


def check_api_key(key: str, source: str = API_KEY_CONFIG) -> None:
    """A `ValueError` naming `source`, without the value, when `key` is not of the form `<keyId>.<secret>`."""
    if not _FORM.fullmatch(key):
        raise ValueError(
            f"{source} is not a Pangolin API key: expected <keyId>.<secret> as Pangolin shows it on creation "
            f"(lowercase letters and digits, one '.', the secret); the value is not shown"
        )
