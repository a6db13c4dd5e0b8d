"""A local process's log excerpt: its problem lines first, else its last lines, else nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from ssh_gateway.local.log_excerpt import log_excerpt

pytestmark = pytest.mark.unit


def test_problems_first_then_the_tail_then_nothing(tmp_path: Path) -> None:
    log = tmp_path / "p.log"
    assert log_excerpt(log, lambda _line: True, 3) == ""
    log.write_text("a\nERR b\nc\nERR d\n")
    assert log_excerpt(log, lambda line: "ERR" in line, 1) == f"\n  last lines of {log}:\n    ERR d"
    assert log_excerpt(log, lambda line: "FTL" in line, 2) == f"\n  last lines of {log}:\n    c\n    ERR d"
