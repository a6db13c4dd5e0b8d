"""Pagination windows shared by the list routes (contract §2.6 and §8 item 8)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

__all__ = ["DEFAULT_PAGE_SIZE", "limit_offset_window", "page_window", "text_filter"]

T = TypeVar("T")
DEFAULT_PAGE_SIZE = 20


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


def text_filter(value: object) -> str | None:
    """The `query` search string, lower-cased, or None when absent."""
    return value.lower() if isinstance(value, str) else None
