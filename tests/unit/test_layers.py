"""The floors of the code (README "How it works"): the import-linter contracts in pyproject.toml hold.

`lint-imports` builds the import graph of the packages (imports inside functions and under TYPE_CHECKING
included) and checks each contract: a floor imports only the floors below it, the tools reach Pangolin through
one seam, the emulator imports nothing of what it stands in for, the core is Pulumi-free, and no two modules of
one package import each other round about.
"""

from __future__ import annotations

import tomllib

import pytest
from importlinter.cli import lint_imports

from ssh_gateway.plumbing.toolchain import REPO

pytestmark = pytest.mark.unit


def _contracts() -> list[dict[str, object]]:
    document = tomllib.loads((REPO / "pyproject.toml").read_text())
    contracts: list[dict[str, object]] = document["tool"]["importlinter"]["contracts"]
    return contracts


def test_every_contract_is_kept(capsys: pytest.CaptureFixture[str]) -> None:
    code = lint_imports(config_filename=str(REPO / "pyproject.toml"), no_cache=True, no_logo=True)
    assert code == 0, capsys.readouterr().out


def test_every_room_of_ssh_gateway_stands_on_a_floor() -> None:
    """A new package under ssh_gateway/ must be given its floor, or the layers contract would not see it."""
    (layers,) = [c for c in _contracts() if c["type"] == "layers"]
    assert isinstance(layers["layers"], list)
    named = {part.strip() for floor in layers["layers"] for part in str(floor).split("|")}
    rooms = {f"ssh_gateway.{p.name}" for p in (REPO / "ssh_gateway").iterdir() if (p / "__init__.py").exists()}
    assert rooms <= named, f"not on any floor: {sorted(rooms - named)}"
