"""A failed `pulumi` command is explained in one line: its name and stack, then its error lines, never its stdout."""

from __future__ import annotations

import json

import pytest

from ssh_gateway.plumbing.pulumi_cli import PulumiFailed, error_lines

pytestmark = pytest.mark.unit


def _preview_json(*diagnostics: tuple[str, str]) -> str:
    return json.dumps({"steps": [], "diagnostics": [{"severity": s, "message": m} for s, m in diagnostics]})


def test_a_json_runs_error_diagnostics_are_its_explanation() -> None:
    stdout = _preview_json(
        ("warning", "a warning is not why it failed"),
        ("error", "  ssh-gateway:instances[0].port: 70000 is not in 40000-40999  "),
        ("error", "error: preview failed"),
    )
    assert error_lines(stdout, "error: one stderr line") == "ssh-gateway:instances[0].port: 70000 is not in 40000-40999"


def test_without_diagnostics_the_last_three_lines_of_stderr_explain_it() -> None:
    stderr = "progress\n\nerror: one\nerror: two\n   \nerror: three\n"
    assert error_lines("", stderr) == "error: one error: two error: three"
    assert error_lines("not json", "") == "no output"


def test_the_message_names_the_command_and_its_stack_not_its_stdout() -> None:
    shown = '{"ssh-gateway:pangolinApiKey": {"value": "hunter2", "secret": true}}'
    failed = PulumiFailed(
        ["config", "--show-secrets", "--json", "--stack", "prod-a"], 255, shown, "error: no stack named 'prod-a'"
    )
    assert str(failed) == "`pulumi config --stack prod-a` failed: error: no stack named 'prod-a'"
    assert (failed.code, failed.stderr) == (255, "error: no stack named 'prod-a'")
    assert "hunter2" not in str(failed)


def test_a_long_explanation_is_cut() -> None:
    assert len(error_lines("", "x" * 5000)) == 600
