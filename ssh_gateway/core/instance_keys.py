"""An instance's config keys and the choices of its `routing` and `target`, in the standard library only.

The settings model (ssh_gateway/core/settings/sections.py) takes them from here, and tests/unit/test_settings.py
checks its instance models have exactly these keys; `ssh-gateway instances add` draws its options from them, so
that `ssh-gateway --help` builds every parser without loading pydantic.
"""

from __future__ import annotations

from typing import Final

from .outputs import Routing

__all__ = ["INSTANCE_KEYS", "ROUTINGS", "TARGETS"]

ROUTINGS: Final = tuple(r.value for r in Routing)
"""An instance's `routing`: a public port of its own, or behind the stack's CONNECT entry."""

TARGETS: Final = ("nodePort", "clusterIp", "static")
"""An instance's `target`, the port-mode ones in the order of the settings' instance models."""

INSTANCE_KEYS: Final = (
    "name",
    "routing",
    "user",
    "target",
    "namespace",
    "port",
    "selector",
    "podPort",
    "nodePort",
    "staticHost",
    "staticPort",
    "sourceCidrs",
    "hostKey",
    "hostKeyGeneration",
)
"""The config keys of an instance in the order of the README's config table (the order `ssh-gateway instances
add` writes them in)."""
