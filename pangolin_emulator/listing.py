"""Pagination windows and the `query` search shared by the list routes (contract §2.6, §4 and
§8 item 8)."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

__all__ = ["limit_offset_window", "page_window", "search_filter"]

T = TypeVar("T")
DEFAULT_PAGE_SIZE = 20
_ASCII_UPPER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def limit_offset_window(items: Sequence[T], query: dict[str, object]) -> tuple[list[T], dict[str, Any]]:
    """≤1.15 lists, targets and domains: `limit` (default 1000) / `offset` (default 0)."""
    limit = int(str(query["limit"]))
    offset = int(str(query["offset"]))
    window = list(items[offset : offset + limit])
    return window, {"total": len(items), "limit": limit, "offset": offset}


def page_window(items: Sequence[T], query: dict[str, object]) -> tuple[list[T], dict[str, Any]]:
    """≥1.16 lists: `page` (default 1, 0 means the first page and is echoed as 0) and
    `pageSize` (default 20, 0 silently becomes 20)."""
    page = int(str(query["page"]))
    page_size = int(str(query["pageSize"])) or DEFAULT_PAGE_SIZE
    start = max(page - 1, 0) * page_size
    window = list(items[start : start + page_size])
    return window, {"total": len(items), "pageSize": page_size, "page": page}


def search_filter(value: object) -> Callable[[str | None], bool] | None:
    """What the 1.16+ `query` list parameter matches in one column, or None when it is absent.

    The contract names the parameter and nothing more (shared/reference/pangolin-api.md §2.6 and
    §4.1; shared/reference/pangolin-1.22.0-openapi.yaml, `GET /org/{orgId}/resources` and
    `GET /org/{orgId}/sites`, parameter `query`, plain `type: string`). Upstream's handlers
    (`server/routers/resource/listResources.ts` and `site/listSites.ts`, 1.16 to 1.22.0) build
    `LOWER(column) LIKE '%' || lower(query) || '%'` with no ESCAPE clause, on SQLite. So:

    - it is a case-insensitive substring search, not an exact-name lookup;
    - `%` and `_` in the query are LIKE wildcards (`_` matches any one character), so a search
      for "a_b" also finds "axb": a client looking for one exact name must compare names itself;
    - SQLite's LOWER() and LIKE fold ASCII letters only, while the query is lower-cased with
      JavaScript's full-Unicode toLowerCase();
    - a NULL column (e.g. a raw resource's fullDomain) never matches; an empty query matches all.
    """
    if not isinstance(value, str) or value == "":
        return None
    parts = (".*" if char == "%" else "." if char == "_" else re.escape(char) for char in value.lower())
    pattern = re.compile(".*" + "".join(parts) + ".*", re.DOTALL)

    def matches(column: str | None) -> bool:
        return column is not None and pattern.fullmatch(column.translate(_ASCII_UPPER)) is not None

    return matches
