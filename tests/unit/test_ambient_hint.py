"""A command run with the offline toolchain while the environment names another backend says so and names --ambient
(issue 29: `recover --stack S` with PULUMI_BACKEND_URL=azblob://... answered only "no stack 'S' ... in
.pulumi-state/backend")."""

from __future__ import annotations

from pathlib import Path

import pytest

from ssh_gateway.ops.cli import main
from ssh_gateway.ops.exit_codes import ExitCode
from ssh_gateway.plumbing import toolchain

pytestmark = pytest.mark.unit

SHARED = "azblob://pulumi-state"


@pytest.fixture
def offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """An offline toolchain whose file backend is an empty directory of the test's own; its URL."""
    backend = f"file://{tmp_path / 'backend'}"
    env_file = tmp_path / ".toolchain.env"
    env_file.write_text(f"SSH_GATEWAY_TOOLCHAIN_PATH={tmp_path / 'bin'}\nPULUMI_BACKEND_URL={backend}\n")
    monkeypatch.setattr(toolchain, "ENV_FILE", env_file)
    return backend


def test_recover_offline_names_the_environments_backend_and_ambient(
    offline: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PULUMI_BACKEND_URL", f"{SHARED}?storage_account=team")

    assert main(["recover", "--stack", "prod-a"]) == ExitCode.CANNOT_RUN

    err = capsys.readouterr().err
    assert "no stack 'prod-a'" in err
    assert (
        f"PULUMI_BACKEND_URL in the environment names {SHARED}, but `ssh-gateway recover` used the offline "
        f"toolchain's backend ({offline}): add --ambient to use the environment's"
    ) in err
    assert "storage_account" not in err


def test_no_hint_without_another_backend_in_the_environment(
    offline: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("PULUMI_BACKEND_URL", raising=False)
    assert main(["recover", "--stack", "prod-a"]) == ExitCode.CANNOT_RUN
    assert "--ambient" not in capsys.readouterr().err

    monkeypatch.setenv("PULUMI_BACKEND_URL", offline)  # the same backend: nothing to point at
    assert toolchain.other_backend_hint("ssh-gateway recover") == ""


def test_no_hint_when_the_command_ran_with_ambient(
    offline: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PULUMI_BACKEND_URL", f"file://{offline.removeprefix('file://')}-shared")
    assert main(["recover", "--ambient", "--stack", "prod-a"]) == ExitCode.CANNOT_RUN
    err = capsys.readouterr().err
    assert "no stack 'prod-a'" in err
    assert "add --ambient" not in err
