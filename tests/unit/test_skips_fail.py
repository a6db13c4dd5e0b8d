"""A skipped test fails the run: a real pytest run of a small test file, with the plugin `tests/conftest.py` loads."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]


def _pytest(tmp_path: Path, source: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_sample.py").write_text(source)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.skips_fail", "-p", "no:cacheprovider", "-q", "test_sample.py"],
        cwd=tmp_path,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_a_skipped_test_fails_the_run_naming_it_and_why(tmp_path: Path) -> None:
    run = _pytest(
        tmp_path,
        "import pytest\n\n"
        "def test_runs():\n    pass\n\n"
        "def test_needs_envoy():\n    pytest.skip('envoy not found')\n\n"
        "@pytest.mark.skipif(True, reason='no sshd')\ndef test_needs_sshd():\n    pass\n",
    )
    assert run.returncode == pytest.ExitCode.TESTS_FAILED, run.stdout
    [line] = [line for line in run.stdout.splitlines() if "test(s) skipped" in line]
    assert line.startswith("FAILED because 2 test(s) skipped"), line
    assert "test_sample.py::test_needs_envoy (envoy not found)" in line, line
    assert "test_sample.py::test_needs_sshd (no sshd)" in line, line


def test_a_module_skipped_at_collection_fails_the_run(tmp_path: Path) -> None:
    run = _pytest(tmp_path, "import pytest\n\npytest.skip('no kube-apiserver', allow_module_level=True)\n")
    assert run.returncode == pytest.ExitCode.TESTS_FAILED, run.stdout
    assert "test_sample.py (no kube-apiserver)" in run.stdout, run.stdout


def test_a_run_without_skips_passes_and_xfail_is_not_a_skip(tmp_path: Path) -> None:
    run = _pytest(
        tmp_path,
        "import pytest\n\ndef test_runs():\n    pass\n\n@pytest.mark.xfail(reason='known')\ndef test_known():\n"
        "    assert False\n",
    )
    assert run.returncode == pytest.ExitCode.OK, run.stdout
    assert "skipped" not in run.stdout, run.stdout
