"""One `ssh-gateway` subcommand as data: its --help, its arguments and its handler, in one `Command`.

`ssh-gateway` (ssh_gateway/ops/cli.py) registers each on its parser, the only one. Standard library only: the
workflows run `python3 -m ssh_gateway.ops shards` on a bare checkout.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .exit_codes import ExitCode

__all__ = ["Command", "ExitCodes", "Handler", "add_ambient", "exit_codes", "say_error"]

if TYPE_CHECKING:
    from typing import TypeAlias

    Commands: TypeAlias = argparse._SubParsersAction[argparse.ArgumentParser]
    """The subcommands of a parser, which a `Command` adds itself to."""

Handler = Callable[[argparse.Namespace], int]
"""What runs a command: its parsed arguments in, its exit code out."""

ExitCodes = Mapping[ExitCode, str]
"""A command's exit codes, each with what it means for that command."""


def exit_codes(codes: ExitCodes) -> str:
    """The `exit codes:` paragraph that ends a --help."""
    return "exit codes:\n" + "\n".join(f"  {code}  {text}" for code, text in sorted(codes.items()))


def say_error(message: str) -> None:
    """A command's one-line error, on stderr."""
    print(f"ssh-gateway: {message}", file=sys.stderr)


def add_ambient(parser: argparse.ArgumentParser) -> None:
    """--ambient, as every command that runs pulumi takes it."""
    parser.add_argument(
        "--ambient",
        action="store_true",
        help="the pulumi on PATH with the environment's backend and secrets (CI), not the offline toolchain",
    )


def _no_arguments(_parser: argparse.ArgumentParser) -> None:
    """A command that takes no argument."""


@dataclass(frozen=True, kw_only=True)
class Command:
    """A subcommand whose --help ends with its examples and exit codes; `run` handles it."""

    name: str
    """What the user types after `ssh-gateway`."""
    summary: str
    """Its line in `ssh-gateway --help`."""
    description: str
    """The paragraph at the top of its own --help (filled to 110 columns)."""
    examples: Sequence[str]
    """Command lines, each with a `# comment` where it is not obvious."""
    codes: ExitCodes
    run: Handler
    arguments: Callable[[argparse.ArgumentParser], None] = _no_arguments
    """Adds its options and positional arguments to its parser."""

    def _epilog(self) -> str:
        return "examples:\n" + "\n".join(f"  {line}" for line in self.examples) + "\n\n" + exit_codes(self.codes)

    def _fill(self, parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
        self.arguments(parser)
        parser.set_defaults(run=self.run, command_name=self.name)
        return parser

    def register(self, commands: Commands) -> argparse.ArgumentParser:
        """Adds this command to `commands`; its parser's default `run` is the handler."""
        return self._fill(
            commands.add_parser(
                self.name,
                help=self.summary,
                description=textwrap.fill(self.description, 110),
                epilog=self._epilog(),
                formatter_class=argparse.RawDescriptionHelpFormatter,
            )
        )
