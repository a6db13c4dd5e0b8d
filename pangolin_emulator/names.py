"""Random "adjective-animal" niceIds, as Pangolin's getUniqueResourceName produces."""

from __future__ import annotations

import secrets
from collections.abc import Callable

__all__ = ["unique_nice_id"]

_ADJECTIVES = (
    "amused", "brave", "calm", "clever", "curious", "daring", "eager", "fancy", "gentle", "happy",
    "humble", "interesting", "jolly", "keen", "lively", "lucky", "mellow", "nimble", "odd", "proud",
    "quick", "quiet", "rash", "sharp", "shy", "silly", "sleepy", "swift", "tidy", "vivid", "wise", "zesty",
)  # fmt: skip
_ANIMALS = (
    "aardvark", "badger", "beaver", "bison", "bobcat", "coyote", "dingo", "ferret", "gecko", "gopher",
    "gopher-tortoise", "hedgehog", "heron", "ibis", "jackal", "koala", "lemur", "long-nosed-snake",
    "lynx", "marmot", "mole", "narwhal", "ocelot", "otter", "pangolin", "puffin", "quokka",
    "star-nosed-mole", "tapir", "walrus", "wombat", "yak",
)  # fmt: skip


def unique_nice_id(taken: Callable[[str], bool]) -> str:
    """A fresh name that `taken` does not report as used in the org."""
    for _ in range(64):
        candidate = f"{secrets.choice(_ADJECTIVES)}-{secrets.choice(_ANIMALS)}"
        if not taken(candidate):
            return candidate
    # The word lists are small; a suffix keeps creation from ever failing on a busy org.
    while True:
        candidate = f"{secrets.choice(_ADJECTIVES)}-{secrets.choice(_ANIMALS)}-{secrets.randbelow(10**6)}"
        if not taken(candidate):
            return candidate
