"""Every test run: a skipped test fails it (`tests/skips_fail.py`)."""

from tests.skips_fail import pytest_configure

__all__ = ["pytest_configure"]
