"""`PortCheckProvider`: after a run's creates, make sure none of the stack's ports is bound twice (the backstop).

Two stacks (or two runs) sharing an org and a range can each bind one port between the other's listing and its
own creates: Pangolin accepts duplicates and has no call that claims a port atomically. Each create settles
that itself, before its resource serves (`provider._claim`). This step is the backstop for what a create does
not see (a resource another tool made and routed on the port): once per run and after every Pangolin resource
of the stack (it depends on all of them), it lists the org once and applies the lowest-id rule
(`ssh_gateway.core.org`): each of the stack's resources that shares its port with an older enabled resource of
another owner is disabled at once, so that the port is bound once when the run ends. The run then fails,
naming both owners; the next `pulumi up` moves those instances to free ports (the allocator's `contest`).

It runs when the stack's ports (instance -> port, known at preview) change, i.e. when this run creates or moves
a resource: a conflict needs a new binding, and the newer binding's run is the one that sees both. The stack's
resources are found in the listing by their names (`<project>/<stack>/<instance>`). The CONNECT entry's
resource is one of them, as `@connect` (its name, `connect_resource_name`): its port is fixed by config, so
the next run does not move it, and its preview refuses the port while the older owner holds it.

Do not move or rename this module or its provider class: each resource's `__provider` in every stack's state is a
pickle of `providers.pangolin.port_check` `PortCheckProvider` (providers/__init__.py; pinned by
tests/unit/test_provider_paths.py).
"""

from __future__ import annotations

from typing import Any, Final

from pulumi import dynamic

from providers.key_diff import diff_keys, without_provider
from ssh_gateway.core.names import CONNECT_ENTRY
from ssh_gateway.core.org import Conflict, losers

from .client import PangolinClient
from .credentials import ApiKeyFromConfig
from .errors import PangolinConflict
from .org import org_view
from .policy import DEFAULT_POLICY, HttpPolicy

__all__ = ["CONNECT_KEY", "PortCheckProvider"]

CHECK_ID: Final = "port-check"
_KEYS: Final = ("apiUrl", "orgId", "ownerPrefix", "ports")
CONNECT_KEY: Final = f"@{CONNECT_ENTRY}"
"""The CONNECT entry's key in `ports`: its resource's name after the owner prefix (`connect_resource_name`)."""


class PortCheckProvider(ApiKeyFromConfig, dynamic.ResourceProvider):
    """Inputs: `apiUrl`, `orgId`, `ownerPrefix`, `ports` (instance -> port). Holds nothing in Pangolin."""

    serialize_as_secret_always = False

    _policy: HttpPolicy = DEFAULT_POLICY  # a class default, so the pickled `__provider` carries no copy of it

    def __init__(self, *, policy: HttpPolicy = DEFAULT_POLICY) -> None:
        super().__init__()
        if policy != DEFAULT_POLICY:
            self._policy = policy

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> dynamic.DiffResult:
        return diff_keys(olds, news, _KEYS)

    def create(self, props: dict[str, Any]) -> dynamic.CreateResult:
        self._verify(props)
        return dynamic.CreateResult(CHECK_ID, props)

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> dynamic.UpdateResult:
        self._verify(news)
        return dynamic.UpdateResult(news)

    def read(self, id_: str, props: dict[str, Any]) -> dynamic.ReadResult:
        # Nothing of its own lives in Pangolin: refresh keeps the last check as it is.
        return dynamic.ReadResult(id_, props, without_provider(props))

    def delete(self, _id: str, _props: dict[str, Any]) -> None:
        """Nothing to delete."""

    def _verify(self, props: dict[str, Any]) -> None:
        """One listing; disable each of the stack's resources that an older one outranks; fail naming them."""
        prefix = str(props.get("ownerPrefix", ""))
        ports = {f"{prefix}{instance}": int(port) for instance, port in (props.get("ports") or {}).items()}
        if not ports:
            return
        with PangolinClient(str(props["apiUrl"]), self.api_key(), policy=self._policy) as client:
            org = org_view(client.list_all_resources(str(props["orgId"])))
            conflicts = losers([b for b in org.bindings if ports.get(b.name) == b.port], org)
            for conflict in conflicts:
                client.update_resource(conflict.loser.resource_id, enabled=False)
        if conflicts:
            raise PangolinConflict(_message(conflicts, prefix), call="GET /org/{orgId}/resources")


def _message(conflicts: list[Conflict], prefix: str) -> str:
    each = "; ".join(
        f"port {c.port}: {c.owner.describe()} (older, keeps it) and this stack's {c.loser.describe()} (disabled)"
        for c in conflicts
    )
    names = [c.loser.name.removeprefix(prefix) for c in conflicts]
    moved = ", ".join(f"'{n}'" for n in names if n != CONNECT_KEY)
    fixes = [f"Run `pulumi up` again: it moves {moved} to free ports"] if moved else []
    if CONNECT_KEY in names:
        fixes.append("choose another ssh-gateway:connect.public.port (the CONNECT entry's port is not allocated)")
    return (
        f"{len(conflicts)} port(s) were bound by another owner while this run bound them too (overlapping runs "
        f"on one org and range): {each}. The lowest resource id keeps a port, so each port is bound once now. "
        + "; ".join(fixes)
    )
