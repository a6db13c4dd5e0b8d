"""Every command is wired one way: a `COMMAND` in ssh_gateway/ops/commands/<its name>.py, whose module loads the
standard library only, so `ssh-gateway --help` builds every parser without the Pulumi SDK, pydantic or httpx."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from ssh_gateway.ops import commands
from ssh_gateway.ops.cli import COMMANDS
from ssh_gateway.plumbing.toolchain import REPO

pytestmark = pytest.mark.unit


def test_each_command_is_the_command_module_of_its_name() -> None:
    modules = sorted(p.stem for p in Path(commands.__file__).parent.glob("*.py") if p.stem != "__init__")
    assert sorted(c.name.replace("-", "_") for c in COMMANDS) == modules
    for command in COMMANDS:
        module = importlib.import_module(f"{commands.__name__}.{command.name.replace('-', '_')}")
        assert module.COMMAND is command


def test_every_parser_builds_with_the_standard_library_only() -> None:
    # As a bare checkout's python3 runs it, without the venv or any site-packages (-S): pydantic, httpx and the
    # Pulumi SDK are not there to be imported by mistake.
    python = str(Path(sys.base_prefix) / "bin" / "python3")
    for argv in (["--help"], *([command.name, "--help"] for command in COMMANDS)):
        done = subprocess.run(
            [python, "-S", "-m", "ssh_gateway.ops", *argv], cwd=REPO, capture_output=True, check=False
        )
        assert done.returncode == 0, (argv, done.stderr.decode())


def test_gateway_configs_help_names_the_files_it_writes() -> None:
    from ssh_gateway.ops.commands.gateway_config import COMMAND
    from ssh_gateway.ops.tools.gateway_files import GERBIL_FILE, TRAEFIK_FILE

    assert TRAEFIK_FILE in COMMAND.description and GERBIL_FILE in COMMAND.description


def test_ops_is_in_rooms_with_no_module_name_twice() -> None:
    """ops/ root is the CLI alone; every other module is in a room (commands/, tools/, shared/, or a tool's package),
    and no two modules share a name, so `demo` or `instances` means one file."""
    ops = Path(commands.__file__).parents[1]
    assert sorted(p.name for p in ops.glob("*.py")) == [
        "__init__.py",
        "__main__.py",
        "cli.py",
        "command.py",
        "exit_codes.py",
    ]
    names = [p.stem for p in ops.rglob("*.py") if p.stem not in ("__init__", "__main__")]
    assert sorted({n for n in names if names.count(n) > 1}) == []
