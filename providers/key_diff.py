"""The diff of a provider whose inputs are its state, compared key by key, and the state a refresh keeps.

Only the named keys are compared, so `__provider` (which changes with a Pulumi or dill upgrade) and computed
outputs never make a diff. The host-identity providers, `PortAllocationProvider` and `PortCheckProvider` diff
this way; `PangolinTcpProvider` does not (absent keys take their defaults, and a replacement deletes first).
"""

from __future__ import annotations

from typing import Any

from pulumi import dynamic

from providers.unknowns import has_unknowns

__all__ = ["diff_keys", "without_provider"]


def changed_keys(olds: dict[str, Any], news: dict[str, Any], keys: tuple[str, ...]) -> list[str]:
    """Which of `keys` differ between the stored outputs and the new inputs (unknown counts as changed)."""
    return [key for key in keys if has_unknowns(news.get(key)) or olds.get(key) != news.get(key)]


def diff_keys(
    olds: dict[str, Any], news: dict[str, Any], keys: tuple[str, ...], *, replace_keys: tuple[str, ...] = ()
) -> dynamic.DiffResult:
    """The diff over `keys`: a changed key updates the resource in place, unless it is one of `replace_keys`."""
    changed = changed_keys(olds, news, keys)
    return dynamic.DiffResult(changes=bool(changed), replaces=[key for key in changed if key in replace_keys])


def without_provider(props: dict[str, Any]) -> dict[str, Any]:
    """The stored properties but the pickled provider (`__provider`)."""
    return {key: value for key, value in props.items() if key != "__provider"}
