"""SQLite state: orgs, keys, sites, domains, resources, targets, call and fault counters.

One connection behind one lock: the HTTP threads and the data-plane thread take turns, which
is plenty for a test double and keeps every operation atomic. Resources and targets keep
their queryable columns as columns and the rest of Pangolin's row in a JSON `attrs` column,
so a restart with the same file loses nothing and AUTOINCREMENT ids never repeat.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

__all__ = ["ResourceFilter", "Row", "Store"]

Row = dict[str, Any]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS orgs (orgId TEXT PRIMARY KEY, name TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS api_keys (
    apiKeyId TEXT PRIMARY KEY, secretHash TEXT NOT NULL, isRoot INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS api_key_orgs (
    apiKeyId TEXT NOT NULL, orgId TEXT NOT NULL, PRIMARY KEY (apiKeyId, orgId));
CREATE TABLE IF NOT EXISTS api_key_actions (
    apiKeyId TEXT NOT NULL, actionId TEXT NOT NULL, PRIMARY KEY (apiKeyId, actionId));
CREATE TABLE IF NOT EXISTS sites (
    siteId INTEGER PRIMARY KEY AUTOINCREMENT, orgId TEXT NOT NULL, niceId TEXT NOT NULL,
    name TEXT NOT NULL, type TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS domains (
    domainId TEXT PRIMARY KEY, baseDomain TEXT NOT NULL, type TEXT NOT NULL, verified INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS org_domains (
    orgId TEXT NOT NULL, domainId TEXT NOT NULL, PRIMARY KEY (orgId, domainId));
CREATE TABLE IF NOT EXISTS resource_policies (
    resourcePolicyId INTEGER PRIMARY KEY AUTOINCREMENT, orgId TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS resources (
    resourceId INTEGER PRIMARY KEY AUTOINCREMENT, orgId TEXT NOT NULL, niceId TEXT NOT NULL,
    name TEXT NOT NULL, mode TEXT NOT NULL, proxyPort INTEGER, enabled INTEGER NOT NULL,
    attrs TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS targets (
    targetId INTEGER PRIMARY KEY AUTOINCREMENT,
    resourceId INTEGER NOT NULL REFERENCES resources (resourceId) ON DELETE CASCADE,
    siteId INTEGER NOT NULL, ip TEXT NOT NULL, port INTEGER NOT NULL, enabled INTEGER NOT NULL,
    attrs TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS resources_by_nice_id ON resources (orgId, niceId);
CREATE INDEX IF NOT EXISTS resources_by_name ON resources (orgId, name, resourceId);
CREATE INDEX IF NOT EXISTS targets_by_resource ON targets (resourceId);
CREATE TABLE IF NOT EXISTS counters (route TEXT PRIMARY KEY, calls INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS fault_counters (
    route TEXT NOT NULL, kind TEXT NOT NULL, faults INTEGER NOT NULL, PRIMARY KEY (route, kind));
"""

_ORG_DOMAINS = "SELECT d.* FROM domains d JOIN org_domains o USING (domainId) WHERE o.orgId = ?"
_RESOURCE_COLUMNS = ("orgId", "niceId", "name", "mode", "proxyPort", "enabled")
_TARGET_COLUMNS = ("resourceId", "siteId", "ip", "port", "enabled")
_RESOURCE_ORDER = {
    "id": "resourceId",
    "name": "name, resourceId",
    "name desc": "name DESC, resourceId DESC",
}
Order = Literal["id", "name", "name desc"]


@dataclass(frozen=True)
class ResourceFilter:
    """What a 1.16+ resource list keeps; `search` is a LIKE pattern (listing.search_pattern)."""

    search: str | None = None
    enabled: bool | None = None
    site_id: float | None = None
    protocol: str | None = None


def _like_any(columns: tuple[str, ...], pattern: str) -> tuple[str, list[Any]]:
    """Upstream's search: `LOWER(column) LIKE pattern` on any of `columns`, no ESCAPE clause."""
    return "(" + " OR ".join(f"LOWER({column}) LIKE ?" for column in columns) + ")", [pattern] * len(columns)


def _resource_where(org_id: str, keep: ResourceFilter) -> tuple[str, list[Any]]:
    clauses: list[str] = ["orgId = ?"]
    args: list[Any] = [org_id]
    if keep.search is not None:
        # Upstream searches name, niceId and fullDomain (and label names in 1.22; the emulator has no labels).
        clause, patterns = _like_any(("name", "niceId", "json_extract(attrs, '$.fullDomain')"), keep.search)
        clauses.append(clause)
        args += patterns
    if keep.enabled is not None:
        clauses.append("enabled = ?")
        args.append(int(keep.enabled))
    if keep.site_id is not None:
        clauses.append("EXISTS (SELECT 1 FROM targets t WHERE t.resourceId = resources.resourceId AND t.siteId = ?)")
        args.append(keep.site_id)
    if keep.protocol in ("http", "https"):
        clauses.append("mode = 'http' AND (IFNULL(json_extract(attrs, '$.ssl'), 0) != 0) = ?")
        args.append(int(keep.protocol == "https"))
    elif keep.protocol is not None:
        clauses.append("mode = ?")
        args.append(keep.protocol)
    return " AND ".join(clauses), args


def _row(cursor: sqlite3.Cursor, values: tuple[Any, ...]) -> Row:
    row = {column[0]: value for column, value in zip(cursor.description, values, strict=True)}
    attrs = json.loads(row.pop("attrs", None) or "{}")
    for flag in ("enabled", "isRoot", "verified"):
        if flag in row:
            row[flag] = bool(row[flag])
    return {**row, **attrs}


def _split(values: Row, columns: tuple[str, ...]) -> tuple[Row, Row]:
    core = {key: values[key] for key in columns if key in values}
    rest = {key: value for key, value in values.items() if key not in columns}
    return core, rest


class Store:
    """All persistent state. Every public method is one transaction."""

    def __init__(self, path: Path) -> None:
        self._lock = threading.RLock()
        self._db = sqlite3.connect(path, check_same_thread=False)
        self._db.row_factory = _row
        self._listeners: list[Callable[[], None]] = []
        with self._tx() as db:
            db.execute("PRAGMA foreign_keys = ON")
            # WAL with NORMAL sync survives a killed process; only an OS crash may lose the
            # last commits, which a test double can afford for much faster writes.
            db.execute("PRAGMA journal_mode = WAL")
            db.execute("PRAGMA synchronous = NORMAL")
            db.executescript(_SCHEMA)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def on_change(self, listener: Callable[[], None]) -> None:
        """Call `listener` after every committed resource or target change."""
        self._listeners.append(listener)

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            try:
                yield self._db
            except BaseException:
                self._db.rollback()
                raise
            self._db.commit()

    def _changed(self) -> None:
        for listener in self._listeners:
            listener()

    # --- orgs, keys --------------------------------------------------------------------

    def ensure_org(self, org_id: str) -> None:
        with self._tx() as db:
            db.execute("INSERT OR IGNORE INTO orgs (orgId, name) VALUES (?, ?)", (org_id, org_id))

    def list_orgs(self) -> list[Row]:
        """Every org, in creation order (a Pangolin `SELECT * FROM orgs` without ORDER BY)."""
        with self._tx() as db:
            return list(db.execute("SELECT * FROM orgs ORDER BY rowid"))

    def put_key(
        self, key_id: str, secret_hash: str, *, is_root: bool, org_id: str | None, actions: tuple[str, ...]
    ) -> None:
        with self._tx() as db:
            db.execute(
                "INSERT OR REPLACE INTO api_keys (apiKeyId, secretHash, isRoot) VALUES (?, ?, ?)",
                (key_id, secret_hash, int(is_root)),
            )
            if org_id is not None:
                db.execute("INSERT OR IGNORE INTO api_key_orgs VALUES (?, ?)", (key_id, org_id))
            db.executemany("INSERT OR IGNORE INTO api_key_actions VALUES (?, ?)", [(key_id, a) for a in actions])

    def get_key(self, key_id: str) -> Row | None:
        with self._tx() as db:
            row: Row | None = db.execute("SELECT * FROM api_keys WHERE apiKeyId = ?", (key_id,)).fetchone()
            return row

    def list_org_keys(self, org_id: str) -> list[str]:
        with self._tx() as db:
            rows = db.execute("SELECT apiKeyId FROM api_key_orgs WHERE orgId = ? ORDER BY apiKeyId", (org_id,))
            return [str(row["apiKeyId"]) for row in rows]

    def key_in_org(self, key_id: str, org_id: str) -> bool:
        with self._tx() as db:
            sql = "SELECT 1 FROM api_key_orgs WHERE apiKeyId = ? AND orgId = ?"
            return db.execute(sql, (key_id, org_id)).fetchone() is not None

    def key_has_action(self, key_id: str, action: str) -> bool:
        with self._tx() as db:
            sql = "SELECT 1 FROM api_key_actions WHERE apiKeyId = ? AND actionId = ?"
            return db.execute(sql, (key_id, action)).fetchone() is not None

    # --- sites, domains ----------------------------------------------------------------

    def ensure_local_site(self, org_id: str, nice_id: str) -> int:
        """The org's first site, creating a `local` one if it has none."""
        with self._tx() as db:
            found = db.execute("SELECT siteId FROM sites WHERE orgId = ? ORDER BY siteId", (org_id,)).fetchone()
            if found is not None:
                return int(found["siteId"])
            cursor = db.execute(
                "INSERT INTO sites (orgId, niceId, name, type) VALUES (?, ?, 'local1', 'local')",
                (org_id, nice_id),
            )
            return int(cursor.lastrowid or 0)

    def get_site(self, site_id: int) -> Row | None:
        with self._tx() as db:
            row: Row | None = db.execute("SELECT * FROM sites WHERE siteId = ?", (site_id,)).fetchone()
            return row

    def list_sites(self, org_id: str, search: str | None = None) -> list[Row]:
        """The org's sites, those whose name or niceId match `search` (listing.search_pattern) if given."""
        where, args = "orgId = ?", [org_id]
        if search is not None:
            clause, patterns = _like_any(("name", "niceId"), search)
            where, args = f"{where} AND {clause}", [*args, *patterns]
        with self._tx() as db:
            return list(db.execute(f"SELECT * FROM sites WHERE {where} ORDER BY siteId", args))  # noqa: S608 - fixed fragments

    def site_resource_count(self, site_id: int) -> int:
        """How many resources have a target on the site."""
        with self._tx() as db:
            sql = "SELECT COUNT(DISTINCT resourceId) AS n FROM targets WHERE siteId = ?"
            return int(db.execute(sql, (site_id,)).fetchone()["n"])

    def ensure_domain(self, org_id: str, domain_id: str, base_domain: str) -> None:
        with self._tx() as db:
            db.execute("INSERT OR IGNORE INTO domains VALUES (?, ?, 'wildcard', 1)", (domain_id, base_domain))
            db.execute("INSERT OR IGNORE INTO org_domains VALUES (?, ?)", (org_id, domain_id))

    def get_org_domain(self, org_id: str, domain_id: str) -> Row | None:
        with self._tx() as db:
            sql = f"{_ORG_DOMAINS} AND d.domainId = ?"
            row: Row | None = db.execute(sql, (org_id, domain_id)).fetchone()
            return row

    def list_domains(self, org_id: str) -> list[Row]:
        with self._tx() as db:
            sql = f"{_ORG_DOMAINS} ORDER BY d.domainId"
            return list(db.execute(sql, (org_id,)))

    # --- resources ---------------------------------------------------------------------

    def new_policy_id(self, org_id: str) -> int:
        with self._tx() as db:
            cursor = db.execute("INSERT INTO resource_policies (orgId) VALUES (?)", (org_id,))
            return int(cursor.lastrowid or 0)

    def nice_id_taken(self, org_id: str, nice_id: str, *, except_id: int | None = None) -> bool:
        with self._tx() as db:
            sql = "SELECT 1 FROM resources WHERE orgId = ? AND niceId = ? AND resourceId IS NOT ?"
            return db.execute(sql, (org_id, nice_id, except_id)).fetchone() is not None

    def insert_resource(self, values: Row) -> Row:
        core, attrs = _split(values, _RESOURCE_COLUMNS)
        with self._tx() as db:
            cursor = db.execute(
                "INSERT INTO resources (orgId, niceId, name, mode, proxyPort, enabled, attrs)"
                " VALUES (:orgId, :niceId, :name, :mode, :proxyPort, :enabled, :attrs)",
                {**core, "attrs": json.dumps(attrs)},
            )
            resource_id = int(cursor.lastrowid or 0)
        self._changed()
        return self._require_resource(resource_id)

    def get_resource(self, resource_id: int) -> Row | None:
        with self._tx() as db:
            row: Row | None = db.execute("SELECT * FROM resources WHERE resourceId = ?", (resource_id,)).fetchone()
            return row

    def _require_resource(self, resource_id: int) -> Row:
        row = self.get_resource(resource_id)
        if row is None:
            raise LookupError(f"resource {resource_id} vanished")
        return row

    def list_resources(self, org_id: str | None = None) -> list[Row]:
        with self._tx() as db:
            if org_id is None:
                return list(db.execute("SELECT * FROM resources ORDER BY resourceId"))
            return list(db.execute("SELECT * FROM resources WHERE orgId = ? ORDER BY resourceId", (org_id,)))

    def page_resources(
        self, org_id: str, keep: ResourceFilter, order: Order, start: int, size: int
    ) -> tuple[int, list[Row]]:
        """The org's resources that `keep` keeps: how many, and those of one window in `order`, filtered,
        sorted and cut in SQL as upstream does, so a page costs its rows, not the org's."""
        where, args = _resource_where(org_id, keep)
        with self._tx() as db:
            total = int(db.execute(f"SELECT COUNT(*) AS n FROM resources WHERE {where}", args).fetchone()["n"])  # noqa: S608 - fixed fragments
            sql = f"SELECT * FROM resources WHERE {where} ORDER BY {_RESOURCE_ORDER[order]} LIMIT ? OFFSET ?"  # noqa: S608 - fixed fragments
            return total, list(db.execute(sql, [*args, size, start]))

    def update_resource(self, resource_id: int, changes: Row) -> Row:
        with self._tx():
            current = self._require_resource(resource_id)
            merged = {**current, **changes}
            core, attrs = _split(merged, _RESOURCE_COLUMNS)
            attrs.pop("resourceId", None)
            assignments = ", ".join(f"{column} = :{column}" for column in core)
            self._db.execute(
                f"UPDATE resources SET {assignments}, attrs = :attrs WHERE resourceId = :resourceId",  # noqa: S608 - fixed column names
                {**core, "attrs": json.dumps(attrs), "resourceId": resource_id},
            )
        self._changed()
        return self._require_resource(resource_id)

    def delete_resource(self, resource_id: int) -> None:
        with self._tx() as db:
            db.execute("DELETE FROM resources WHERE resourceId = ?", (resource_id,))
        self._changed()

    # --- targets -----------------------------------------------------------------------

    def insert_target(self, values: Row) -> Row:
        core, attrs = _split(values, _TARGET_COLUMNS)
        with self._tx() as db:
            cursor = db.execute(
                "INSERT INTO targets (resourceId, siteId, ip, port, enabled, attrs)"
                " VALUES (:resourceId, :siteId, :ip, :port, :enabled, :attrs)",
                {**core, "attrs": json.dumps(attrs)},
            )
            target_id = int(cursor.lastrowid or 0)
        self._changed()
        return self._require_target(target_id)

    def get_target(self, target_id: int) -> Row | None:
        with self._tx() as db:
            row: Row | None = db.execute("SELECT * FROM targets WHERE targetId = ?", (target_id,)).fetchone()
            return row

    def _require_target(self, target_id: int) -> Row:
        row = self.get_target(target_id)
        if row is None:
            raise LookupError(f"target {target_id} vanished")
        return row

    def list_targets(self, resource_id: int | None = None) -> list[Row]:
        with self._tx() as db:
            if resource_id is None:
                return list(db.execute("SELECT * FROM targets ORDER BY targetId"))
            return list(db.execute("SELECT * FROM targets WHERE resourceId = ? ORDER BY targetId", (resource_id,)))

    def targets_of(self, resource_ids: list[int]) -> list[Row]:
        """The targets of these resources, in id order."""
        with self._tx() as db:
            sql = "SELECT * FROM targets WHERE resourceId IN (SELECT value FROM json_each(?)) ORDER BY targetId"
            return list(db.execute(sql, (json.dumps(resource_ids),)))

    def update_target(self, target_id: int, changes: Row) -> Row:
        with self._tx():
            merged = {**self._require_target(target_id), **changes}
            core, attrs = _split(merged, _TARGET_COLUMNS)
            attrs.pop("targetId", None)
            self._db.execute(
                "UPDATE targets SET resourceId = :resourceId, siteId = :siteId, ip = :ip, port = :port,"
                " enabled = :enabled, attrs = :attrs WHERE targetId = :targetId",
                {**core, "attrs": json.dumps(attrs), "targetId": target_id},
            )
        self._changed()
        return self._require_target(target_id)

    def delete_target(self, target_id: int) -> None:
        with self._tx() as db:
            db.execute("DELETE FROM targets WHERE targetId = ?", (target_id,))
        self._changed()

    # --- counters ----------------------------------------------------------------------

    def count_call(self, route: str) -> None:
        with self._tx() as db:
            db.execute(
                "INSERT INTO counters (route, calls) VALUES (?, 1) ON CONFLICT (route) DO UPDATE SET calls = calls + 1",
                (route,),
            )

    def count_fault(self, route: str, kind: str) -> None:
        with self._tx() as db:
            db.execute(
                "INSERT INTO fault_counters (route, kind, faults) VALUES (?, ?, 1)"
                " ON CONFLICT (route, kind) DO UPDATE SET faults = faults + 1",
                (route, kind),
            )

    def counters(self) -> tuple[dict[str, int], dict[str, dict[str, int]]]:
        """(calls per route, injected faults per route and kind)."""
        with self._tx() as db:
            calls = {row["route"]: int(row["calls"]) for row in db.execute("SELECT * FROM counters ORDER BY route")}
            faults: dict[str, dict[str, int]] = {}
            for row in db.execute("SELECT * FROM fault_counters ORDER BY route, kind"):
                faults.setdefault(row["route"], {})[row["kind"]] = int(row["faults"])
        return calls, faults

    def reset_counters(self) -> None:
        with self._tx() as db:
            db.execute("DELETE FROM counters")
            db.execute("DELETE FROM fault_counters")
