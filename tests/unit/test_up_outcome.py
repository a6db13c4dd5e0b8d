"""`ssh-gateway up`'s exit code and last line from how its `pulumi up` ended (docs/commands.md, exit codes)."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from ssh_gateway.core.refusal_note import REFUSAL_FILE_ENV, note_refusal, noted_refusals
from ssh_gateway.ops.exit_codes import ExitCode
from ssh_gateway.ops.tools.up_outcome import error_messages, up_outcome

pytestmark = pytest.mark.unit

CONFLICT = (
    'creating failed: Status=400 Code="SecurityRuleConflict" Message="Security rule x conflicts with rule y. '
    'Rules cannot have the same Priority and Direction."'
)
THROTTLED = 'Status=429 Code="RetryableError" Message="A retryable error occured."'


def test_a_success_is_0_with_no_hint() -> None:
    outcome = up_outcome("dev", 0, refusals=["left by an earlier step"], errors=["a warning turned error"])
    assert (outcome.code, outcome.hint) == (ExitCode.OK, None)


def test_a_noted_refusal_is_3_whatever_pulumi_exited_with() -> None:
    for code in (1, 2, 255):
        outcome = up_outcome("dev", code, refusals=["ssh-gateway:ports.rnage: unknown key"], errors=[])
        assert outcome.code == ExitCode.REFUSED
        assert outcome.hint is not None and "nothing was written" in outcome.hint and "recover" not in outcome.hint


@pytest.mark.parametrize(("pulumi_code", "expected"), [(2, 2), (3, 2), (6, 2), (8, 130), (-signal.SIGINT, 130)])
def test_pulumis_own_codes_are_mapped_never_passed_on(pulumi_code: int, expected: int) -> None:
    # pulumi's 3 is a login error, ours is "refused": passed on, it would tell a caller the wrong thing.
    assert up_outcome("dev", pulumi_code, refusals=[], errors=[]).code == expected


@pytest.mark.parametrize("pulumi_code", [1, 4, 255, -signal.SIGKILL])
def test_any_other_failure_is_1_with_the_recover_hint(pulumi_code: int) -> None:
    outcome = up_outcome("dev", pulumi_code, refusals=[], errors=["Pangolin answered 500"])
    assert outcome.code == ExitCode.FAILED
    assert outcome.hint is not None and "ssh-gateway recover --stack dev" in outcome.hint


def test_after_a_priority_conflict_the_hint_says_run_again_not_recover() -> None:
    outcome = up_outcome("dev", 1, refusals=[], errors=["some other error", CONFLICT])
    assert outcome.code == ExitCode.FAILED
    assert outcome.hint is not None
    assert "SecurityRuleConflict" in outcome.hint and "picks a free priority" in outcome.hint
    assert "Run ssh-gateway up --stack dev again" in outcome.hint and "recover" not in outcome.hint


def test_after_azures_429_the_hint_says_wait_then_run_again() -> None:
    outcome = up_outcome("dev", 1, refusals=[], errors=[THROTTLED])
    assert outcome.code == ExitCode.FAILED
    assert outcome.hint is not None and "wait a few minutes" in outcome.hint and "recover" not in outcome.hint


def test_the_event_logs_error_diagnostics_are_read_and_a_cut_last_line_is_skipped(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    events = [
        {"sequence": 1, "diagnosticEvent": {"message": "a warning", "severity": "warning"}},
        {"sequence": 2, "diagnosticEvent": {"message": CONFLICT, "severity": "error"}},
        {"sequence": 3, "summaryEvent": {"resourceChanges": {}}},
    ]
    log.write_text("\n".join(json.dumps(e) for e in events) + '\n{"sequence": 4, "diagn')
    assert error_messages(log) == [CONFLICT]
    assert error_messages(tmp_path / "absent") == []


def test_refusals_are_appended_to_the_named_file_as_one_line_each(tmp_path: Path) -> None:
    path = tmp_path / "refusals"
    note_refusal("not noted: no file named", {})
    assert noted_refusals(path) == []
    note_refusal("NSG 'nsg' would hold 1,001 rules,\n over Azure's 1,000", {REFUSAL_FILE_ENV: str(path)})
    note_refusal("ssh-gateway:ports.range 20000-20009 is exhausted", {REFUSAL_FILE_ENV: str(path)})
    assert noted_refusals(path) == [
        "NSG 'nsg' would hold 1,001 rules, over Azure's 1,000",
        "ssh-gateway:ports.range 20000-20009 is exhausted",
    ]
