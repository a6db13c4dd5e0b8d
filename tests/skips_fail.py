"""A pytest plugin: any skipped test fails the run, with a line naming each skipped test and why.

A test that skips because a tool is missing (no Envoy, no sshd, no kube-apiserver) would otherwise pass in CI
without having run. The repo's tests never skip on purpose (what a test needs, `scripts/bootstrap` installs),
so a skip always means a broken setup. `tests/conftest.py` loads this plugin for every run. Deselection with
`-m` or `-k` is not a skip and stays allowed.
"""

from __future__ import annotations

import pytest

__all__ = ["SkipsFail", "pytest_configure"]


class SkipsFail:
    """Collects the skips of one session and fails the session when there were any."""

    def __init__(self) -> None:
        self.skipped: list[str] = []

    def _record(self, report: pytest.CollectReport | pytest.TestReport) -> None:
        if report.skipped and not hasattr(report, "wasxfail"):  # an xfail reports as skipped too
            longrepr = report.longrepr
            reason = str(longrepr[2]) if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
            self.skipped.append(f"{report.nodeid} ({reason.removeprefix('Skipped: ')})")

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self._record(report)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        self._record(report)  # a module-level skip

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        # A run of nothing but skips ends "no tests collected" (5): make it a failure all the same.
        if self.skipped and session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.skipped:
            terminalreporter.write_line(
                f"FAILED because {len(self.skipped)} test(s) skipped, and a skip must never pass silently (run "
                f"scripts/bootstrap for a missing tool): {'; '.join(self.skipped)}",
                red=True,
                bold=True,
            )


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(SkipsFail(), "skips-fail")
