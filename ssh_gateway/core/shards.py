"""Environments and their shards: which stacks deploy together (docs/scaling.md, "Scale out by stacks").

Every stack has a file `stacks/Pulumi.<stack>.yaml`. A stack named `<env>` or `<env>-<shard>` belongs to the
environment `<env>` (so an environment's name has no `-`): `prod-a` … `prod-d` are the shards of `prod`, `dev` is
an environment of one stack. The GitHub environment (its reviewers and secrets) is the environment's, one per
environment, not per shard. `local` lives on a developer's machine (the emulator and the file backend) and is
never deployed by CI. The workflows list the stacks with `python3 -m ssh_gateway.ops shards`, this rule's command.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

__all__ = ["DeployedStack", "ShardsError", "deployed_stacks", "environment_of"]

LOCAL_STACK: Final = "local"
_STACK_FILE: Final = re.compile(r"^Pulumi\.(?P<stack>[A-Za-z0-9_.-]+)\.yaml$")
_ENVIRONMENT: Final = re.compile(r"^[A-Za-z0-9_.]+$")


class ShardsError(ValueError):
    """An environment that is not a name, or that has no stack file."""


@dataclass(frozen=True, order=True)
class DeployedStack:
    """A stack CI deploys, and the environment it belongs to."""

    environment: str
    stack: str


def environment_of(stack: str) -> str:
    """`prod-b` → `prod`; `dev` → `dev`."""
    return stack.split("-", 1)[0]


def deployed_stacks(file_names: Iterable[str], environments: Sequence[str] = ()) -> list[DeployedStack]:
    """The stacks whose files are among `file_names` (`Pulumi.<stack>.yaml`), of `environments` (every one but
    `local` when none is given), sorted by environment, then stack. Raises `ShardsError` for an environment that
    is not a name or has no stack."""
    for environment in environments:
        if not _ENVIRONMENT.match(environment):
            raise ShardsError(f"--env {environment!r}: an environment is a name without '-' (e.g. prod)")
    stacks = sorted(
        DeployedStack(environment_of(match["stack"]), match["stack"])
        for match in (_STACK_FILE.match(name) for name in file_names)
        if match and match["stack"] != LOCAL_STACK
    )
    if not environments:
        return stacks
    known = sorted({s.environment for s in stacks})
    for environment in environments:
        if environment not in known:
            raise ShardsError(
                f"--env {environment!r}: no stacks/Pulumi.{environment}.yaml or stacks/Pulumi.{environment}-*.yaml "
                f"(environments with stack files: {', '.join(known) or 'none'})"
            )
    return [s for s in stacks if s.environment in environments]
