"""`OrgLedger`: what one provider process knows of an org's resources, by id, so that a create's port claim
needs no listing of the whole org.

A claim (`provider._claim`) must see every enabled resource on its port that was made before the new one.
One listing per create does that, but costs a page per 100 resources of the org: a first `up` of N lists
N²/200 pages, which at 1000 instances was most of the run (the emulator's CPU: 107 of 133 s). Pangolin's ids
grow with creation and are never reused (SQLite AUTOINCREMENT), so the resources made before resource `r`
are exactly the ids below `r`. The ledger keeps the ids it has seen: the process's own creates as they
answer, one listing, and single reads of the ids in between that it did not make. A create whose id follows
ids the ledger knows is decided from the ledger; each id someone else made since costs one `GET`; only a
long run of unknown ids (a fresh ledger, a busy org) costs a listing again. A first `up` then lists the org
about once, and 4 shards creating into one org at once read each other's ids one by one.

Shared state across calls, deliberately (and not a hidden channel: the provider owns one ledger per org and
passes it to every call that writes a resource): the engine runs up to 4 calls at once on one provider
instance, and the ledger is what lets them share what they learned. It lives as long as the provider
process, i.e. one `pulumi up`, and is never pickled.

What it may get wrong is safe: a resource of someone else's that changes after the ledger read it (deleted,
disabled) still counts as a rival, so a create could yield a port it might have won (it fails, and the next
run moves it). A rival that someone moves onto the port after the ledger read it is what the run's final
check (`port_check`) catches, as it catches a rival made by a tool that makes no claims at all.
"""

from __future__ import annotations

import itertools
import threading
from typing import Final

from ssh_gateway.core.org import Binding

from .client import PangolinClient
from .errors import PangolinError, PangolinNotFound
from .models import Resource
from .org import org_view

__all__ = ["OrgLedger", "OrgLedgers"]

# Unknown ids below a new one that are read one by one; more than this, and the org is listed instead (a
# listing costs a request per 100 resources, so 10 single reads is about the price of a small org's listing).
READ_ONE_BY_ONE_AT_MOST: Final = 10


class OrgLedger:
    """The resources of one org that this process has seen, by id: their bindings, or None for an id that is
    gone or belongs to another org. Thread-safe."""

    def __init__(self, org_id: str) -> None:
        self._org_id = org_id
        self._lock = threading.Lock()
        self._listing = threading.Lock()  # one listing at a time; the others wait, then reuse it
        self._known: dict[int, Binding | None] = {}  # what it learned of single ids: None when gone or not this org's
        self._on_port: dict[tuple[int, str], dict[int, Binding]] = {}  # (port, protocol) -> the enabled ones
        self._known_below = 1  # every id below this one is known: in `_known`, else gone or another org's
        self._own: set[int] = set()  # the resources this process created: what it knows of them is the latest

    def created(self, resource: Resource) -> None:
        """A resource this process created, as the create answered.

        (A create of this process still in flight when another's claim reads its id counts as gone until it
        answers: harmless, since one run never makes two resources on one port.)"""
        with self._lock:
            self._own.add(resource.resourceId)
            self._put(resource.resourceId, _binding(resource))

    def changed(self, resource: Resource) -> None:
        """A resource this process updated (renamed, disabled), as the update answered."""
        with self._lock:
            self._put(resource.resourceId, _binding(resource))

    def gone(self, resource_id: int) -> None:
        """A resource this process deleted (or found deleted)."""
        with self._lock:
            self._put(resource_id, None)

    def older_rivals(self, client: PangolinClient, mine: Binding) -> list[Binding]:
        """Every resource of the org on `mine`'s port with a lower id, as far as anyone can know once `mine`
        exists: what `core.org.losers` weighs the claim against."""
        unknown = self._unknown_below(mine.resource_id)
        if len(unknown) > READ_ONE_BY_ONE_AT_MOST or not self._read_each(client, unknown):
            self._list(client, mine.resource_id)
        with self._lock:
            on_port = self._on_port.get((mine.port, mine.protocol), {})
            rivals = [i for i in on_port if i < mine.resource_id]
        # Rare, and what the ledger learned of them may be old: read each again, so a rival that has since been
        # deleted, disabled or moved does not make this create yield a port it won.
        if rivals and not self._read_each(client, rivals):
            self._list(client, mine.resource_id, again=True)
        with self._lock:
            on_port = self._on_port.get((mine.port, mine.protocol), {})
            return [b for i, b in on_port.items() if i < mine.resource_id]

    # --- learning ------------------------------------------------------------------------------------------

    def _unknown_below(self, resource_id: int) -> list[int]:
        """The unknown ids below `resource_id`, up to one more than are read one by one (a fresh ledger's may be
        a server's whole history)."""
        with self._lock:
            unknown = (i for i in range(self._known_below, resource_id) if i not in self._known)
            return list(itertools.islice(unknown, READ_ONE_BY_ONE_AT_MOST + 1))

    def _read_each(self, client: PangolinClient, ids: list[int]) -> bool:
        """Read the ids one by one; False if one answered with anything but the resource or "not found"."""
        for resource_id in ids:
            try:
                resource = client.get_resource(resource_id)
            except PangolinNotFound:
                self.gone(resource_id)
                continue
            except PangolinError:
                return False  # a listing decides instead (a 403 for another org's id, say)
            if resource.orgId is None:
                return False  # a shape that does not say whose it is: only a listing of the org can tell
            with self._lock:
                if resource_id not in self._own:
                    self._put(resource_id, _binding(resource) if resource.orgId == self._org_id else None)
        return True

    def _list(self, client: PangolinClient, resource_id: int, *, again: bool = False) -> None:
        """List the org once, unless (and not `again`) another call's listing that began after `resource_id`
        existed already covers it: the listing shows every resource of the org with a lower id not deleted."""
        with self._listing:
            if not again and not self._unknown_below(resource_id):
                return
            listed = org_view(client.list_all_resources(self._org_id)).bindings
            with self._lock:
                for binding in listed:
                    if binding.resource_id not in self._own:
                        self._put(binding.resource_id, binding)
                # Every id below `resource_id` that the listing did not show is gone or another org's: known too,
                # without an entry each (a server's ids run far ahead of what an org holds).
                self._known_below = max(self._known_below, resource_id)
                self._advance()

    def _put(self, resource_id: int, binding: Binding | None) -> None:
        # Holding `_lock`.
        old = self._known.get(resource_id)
        if old is not None:
            self._on_port.get((old.port, old.protocol), {}).pop(resource_id, None)
        self._known[resource_id] = binding
        if binding is not None and binding.enabled:
            self._on_port.setdefault((binding.port, binding.protocol), {})[resource_id] = binding
        self._advance()

    def _advance(self) -> None:
        # Holding `_lock`.
        while self._known_below in self._known:
            self._known_below += 1


def _binding(resource: Resource) -> Binding | None:
    view = org_view([resource]).bindings
    return view[0] if view else None


class OrgLedgers:
    """One `OrgLedger` per API server and org, made on first use. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ledgers: dict[tuple[str, str], OrgLedger] = {}

    def of(self, api_url: str, org_id: str) -> OrgLedger:
        with self._lock:
            return self._ledgers.setdefault((api_url, org_id), OrgLedger(org_id))
