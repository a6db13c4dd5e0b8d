"""Drift check: has anyone changed Pangolin, Kubernetes (Services, the CONNECT EnvoyFilters) or the NSG by hand?

    scripts/drift-check STACK              # the offline toolchain (scripts/pulumi's environment)
    scripts/drift-check --ambient STACK    # the pulumi on PATH with the environment's backend (CI)

Runs `pulumi preview --refresh --expect-no-changes --json`: the refresh reads every resource as it really is,
and the preview then proposes to put back whatever differs from the program. Any proposed step is drift; this
turns it into a message naming each drifted resource, its instance, and what differs (live → declared).
Exit codes: 0 no drift, 1 drift, 2 the preview itself failed (its errors are printed).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from ssh_gateway.core.names import entry_of, instance_of, urn_name, urn_type
from ssh_gateway.ops.exit_codes import ExitCode
from ssh_gateway.ops.preview.steps import Preview, parse_preview
from ssh_gateway.plumbing.toolchain import REPO, pulumi_env

__all__ = ["Drift", "check_drift", "report"]

# Steps that only read: everything else is a change the preview proposes.
_QUIET_OPS: Final = frozenset({"same", "read", "refresh", "discard", "read-discard"})
_WHAT: Final = {
    "update": "changed outside Pulumi",
    "replace": "changed outside Pulumi (putting it back replaces it)",
    "create-replacement": "changed outside Pulumi (putting it back replaces it)",
    "delete-replaced": "changed outside Pulumi (putting it back replaces it)",
    "create": "missing: deleted outside Pulumi (or never created)",
    "delete": "in the stack but no longer in the program",
}


@dataclass(frozen=True)
class Drift:
    """One resource the preview would change."""

    urn: str
    op: str
    differences: tuple[str, ...]
    """`key: live → declared`, one per differing input."""

    @property
    def name(self) -> str:
        return urn_name(self.urn)

    @property
    def type(self) -> str:
        return urn_type(self.urn)

    @property
    def instance(self) -> str | None:
        """The instance the resource belongs to (either routing): the component itself, or one of its children."""
        return instance_of(self.urn)

    @property
    def owner(self) -> str:
        """`, instance <name>` or `, the CONNECT entry` for the report; empty for the stack's own resources."""
        if self.instance:
            return f", instance {self.instance}"
        return ", the CONNECT entry" if entry_of(self.urn) else ""


_STEERING = frozenset({"adoptResourceId"})
"""Inputs that only steer a create and are no part of a resource's diff (a Pangolin resource's listing hint): a
replacement's new inputs carry it, and it is no drift."""


def _shown(value: Any) -> str:
    return json.dumps(value, sort_keys=True) if value is not None else "(none)"


def drift_of(preview: Preview) -> list[Drift]:
    """The resources a `preview --refresh --json` proposes to change, one entry each (replacements merged)."""
    found: dict[str, Drift] = {}
    for step in preview.steps:
        if step.op in _QUIET_OPS:
            continue
        urn, op = step.urn, step.op
        # The inputs only: what the program declares against what the refresh read back.
        live = step.old.inputs if step.old is not None else {}
        declared = step.new.inputs if step.new is not None else {}
        differences = (
            tuple(
                f"{key}: {_shown(live.get(key))} → {_shown(declared.get(key))}"
                for key in sorted({*live, *declared})
                if not key.startswith("__") and key not in _STEERING and live.get(key) != declared.get(key)
            )
            if live and declared
            else ()
        )
        if urn not in found or (differences and not found[urn].differences):
            found[urn] = Drift(urn=urn, op=op, differences=differences)
    return list(found.values())


def report(stack: str, drifts: Sequence[Drift]) -> str:
    """The message: which resources drifted, how, and what to do."""
    if not drifts:
        return f"No drift in stack {stack}: Pangolin, Kubernetes and the NSG match the program."
    lines = [
        f"Drift in stack {stack}: {len(drifts)} resource(s) differ from what the program declares (live → declared):"
    ]
    for drift in drifts:
        lines.append(f"  - {drift.name} ({drift.type}{drift.owner}): {_WHAT.get(drift.op, drift.op)}")
        lines += [f"      {difference}" for difference in drift.differences]
    lines.append(
        f"Put it back with `pulumi up --refresh --stack {stack}` (without --refresh, up compares with the state, "
        "which still holds the old values), or adopt the change in the stack's config through a pull request."
    )
    return "\n".join(lines)


def _preview(stack: str, *, ambient: bool) -> subprocess.CompletedProcess[str]:
    argv = ["pulumi", "preview", "--refresh", "--expect-no-changes", "--json", "--non-interactive", "--stack", stack]
    env = dict(os.environ) if ambient else pulumi_env()
    return subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, check=False)  # noqa: S603


def check_drift(stack: str, *, ambient: bool = False) -> int:
    """`ssh-gateway drift-check`: the drift of `stack` printed; OK none, FAILED drift, CANNOT_RUN no preview.
    `ambient`: the pulumi on PATH with the environment's backend and secrets (CI), not the offline toolchain."""
    result = _preview(stack, ambient=ambient)
    try:
        document = json.loads(result.stdout) if result.stdout.strip() else None
    except json.JSONDecodeError:
        document = None
    preview = parse_preview(document) if isinstance(document, Mapping) else None
    errors = preview.errors() if preview is not None else []
    drifts = drift_of(preview) if preview is not None else []
    if drifts:
        print(report(stack, drifts))
        return ExitCode.FAILED
    if result.returncode != 0 or preview is None:
        detail = "\n".join(errors) or result.stderr.strip() or result.stdout.strip()[:2000]
        print(f"drift-check: the preview of stack {stack} failed (exit {result.returncode}):\n{detail}")
        return ExitCode.CANNOT_RUN
    print(report(stack, []))
    return ExitCode.OK
