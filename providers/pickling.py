"""Undoes the pickler wrapping that pulumi's `serialize_provider` leaves behind.

`pulumi/dynamic/dynamic.py` (3.259.0) replaces `pickle._Pickler._batch_setitems` with a dict-sorting
wrapper around whatever is there, every time it pickles a provider, and never puts it back. The N-th
dynamic resource of a program is then pickled through N nested wrappers: O(N) work per resource, and a
`RecursionError` in `serialize_provider` near 1 000 resources (what pulumi/pulumi#17803 reports). Every
dynamic resource of this project calls `unwrap_batch_setitems()` before registering, so exactly one
wrapper is ever in place.
"""

from __future__ import annotations

import pickle
from typing import Any


def unwrap_batch_setitems() -> None:
    """Puts the standard library's `_batch_setitems` back, however deep pulumi's wrappers are."""
    method: Any = pickle._Pickler._batch_setitems  # type: ignore[attr-defined]
    while getattr(method, "__module__", "pickle") != "pickle" and method.__closure__:
        method = next(cell.cell_contents for cell in method.__closure__ if callable(cell.cell_contents))
    pickle._Pickler._batch_setitems = method  # type: ignore[attr-defined]
