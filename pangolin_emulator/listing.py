"""Pagination windows and the `query` search shared by the list routes (contract §2.6, §4 and
§8 item 8)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

__all__ = ["Window", "limit_offset_window", "page_window", "search_pattern"]

T = TypeVar("T")
DEFAULT_PAGE_SIZE = 20


@dataclass(frozen=True)
class Window:
    """Which rows a list answers (`start`, at most `size`), and what its pagination echoes beside `total`."""

    start: int
    size: int
    echo: dict[str, Any]

    def pagination(self, total: int) -> dict[str, Any]:
        return {"total": total, **self.echo}

    def of(self, items: Sequence[T]) -> tuple[list[T], dict[str, Any]]:
        return list(items[self.start : self.start + self.size]), self.pagination(len(items))


def limit_offset_window(query: dict[str, object]) -> Window:
    """≤1.15 lists, targets and domains: `limit` (default 1000) / `offset` (default 0)."""
    limit = int(str(query["limit"]))
    offset = int(str(query["offset"]))
    return Window(offset, limit, {"limit": limit, "offset": offset})


def page_window(query: dict[str, object]) -> Window:
    """≥1.16 lists: `page` (default 1, 0 means the first page and is echoed as 0) and
    `pageSize` (default 20, 0 silently becomes 20)."""
    page = int(str(query["page"]))
    page_size = int(str(query["pageSize"])) or DEFAULT_PAGE_SIZE
    return Window(max(page - 1, 0) * page_size, page_size, {"pageSize": page_size, "page": page})


def search_pattern(value: object) -> str | None:
    """The SQL `LIKE` pattern the 1.16+ `query` list parameter matches against `LOWER(column)`, or None
    when it is absent or empty (an empty query matches all).

    The contract names the parameter and nothing more (shared/reference/pangolin-api.md §2.6 and
    §4.1; shared/reference/pangolin-1.22.0-openapi.yaml, `GET /org/{orgId}/resources` and
    `GET /org/{orgId}/sites`, parameter `query`, plain `type: string`). Upstream's handlers
    (`server/routers/resource/listResources.ts` and `site/listSites.ts`, 1.16 to 1.22.0) build
    `LOWER(column) LIKE '%' || lower(query) || '%'` with no ESCAPE clause, on SQLite, and so does
    the emulator's store. So:

    - it is a case-insensitive substring search, not an exact-name lookup;
    - `%` and `_` in the query are LIKE wildcards (`_` matches any one character), so a search
      for "a_b" also finds "axb": a client looking for one exact name must compare names itself;
    - SQLite's LOWER() and LIKE fold ASCII letters only, while the query is lower-cased with
      JavaScript's full-Unicode toLowerCase();
    - a NULL column (e.g. a raw resource's fullDomain) never matches.
    """
    if not isinstance(value, str) or value == "":
        return None
    return f"%{value.lower()}%"
