"""The reviewer's view of a preview: `pulumi preview --json` as a short Markdown table.

    scripts/pulumi preview --json --stack dev | ssh-gateway preview-summary --file -
    ssh-gateway preview-summary --file preview.json
    scripts/preview-summary dev            # runs the preview, then renders it

One row per instance the preview touches: added, removed, port changed, target changed, routing changed, or
touched (something of it changes, but neither its port nor its target), with its public endpoint and the NSG
rules it opens or closes; a connect-mode instance's row gives its CONNECT authority, and the stack's CONNECT
entry has a row of its own.
Then the warnings: the port range nearly exhausted, ports freed, rules open to anyone, and the preview's errors.

It reads the preview's steps, diagnostics and the stack's config through the one model of a preview
(ssh_gateway/ops/preview/steps.py); rows.py makes the rows.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from ssh_gateway.core.firewall import opens_to_world
from ssh_gateway.core.names import urn_name
from ssh_gateway.core.outputs import Routing

from .context import ENTRY_ROW, Allocation, outputs_before, read_allocation, read_endpoints
from .rows import InstanceChange, instance_rows
from .steps import Preview, Step, parse_preview

__all__ = ["Summary", "render", "summarize", "summary_json", "summary_markdown"]


EXHAUSTION_THRESHOLD: Final = 0.8
"""Warn when at least this share of the range's usable ports is allocated."""


@dataclass(frozen=True)
class Summary:
    """A preview, read for review."""

    stack: str | None
    rows: tuple[InstanceChange, ...]
    warnings: tuple[str, ...]
    resource_changes: Mapping[str, int] = field(default_factory=dict)
    """The preview's own `changeSummary` (resources by op)."""


def _stack_name(steps: Sequence[Step]) -> str | None:
    for step in steps:
        urn = step.urn
        if urn.startswith("urn:pulumi:"):
            return urn.removeprefix("urn:pulumi:").split("::", 1)[0]
    return None


def _warnings(preview: Preview, rows: Sequence[InstanceChange], alloc: Allocation) -> list[str]:
    warnings = []
    if alloc.port_range is not None:
        rng = alloc.port_range
        usable = rng.size - len([p for p in set(alloc.reserved) if p in rng])
        used = len(alloc.new_ports)
        if usable > 0 and used / usable >= EXHAUSTION_THRESHOLD:
            warnings.append(
                f"Port range {rng} is {used * 100 // usable}% allocated ({used} of {usable} usable ports, "
                f"{max(usable - used, 0)} free): widen `ssh-gateway:ports.range` (and the gateway's published "
                "range) before it runs out."
            )
    old_holders = {port: name for name, port in alloc.old_ports.items()}
    freed = sorted(set(alloc.old_ports.values()) - set(alloc.new_ports.values()))
    if freed:
        listed = ", ".join(f"{p} (was `{old_holders[p]}`)" for p in freed)
        warnings.append(
            f"Ports freed: {listed}. An ssh config that still has the old endpoint stops working; the allocator "
            "hands a freed port out again only after every never-used port."
        )
    for name, port in sorted(alloc.new_ports.items(), key=lambda item: item[1]):
        previous = old_holders.get(port)
        if previous is not None and previous != name:
            warnings.append(
                f"Port {port} passes from `{previous}` to `{name}`: an ssh config that still has `{previous}` on "
                f"{port} now reaches `{name}` (its host key differs, so ssh will refuse until the entry is fixed)."
            )
    for row in rows:
        for rule in row.firewall:
            opened = rule.split(" to ", 1)[1] if " to " in rule else ""
            if opens_to_world(opened.split(",")):
                warnings.append(f"`{row.instance}`: the NSG rule {rule}, i.e. to anyone.")
    for diagnostic in preview.diagnostics:
        if diagnostic.severity in ("error", "warning"):
            message = diagnostic.message.strip().removeprefix("error: ")
            where = f" ({urn_name(diagnostic.urn)})" if diagnostic.urn else ""
            warnings.append(f"Preview {diagnostic.severity}{where}: {message}")
    return warnings


_ORDER: Final = (
    "added",
    "port and target changed",
    "port changed",
    "target changed",
    "routing changed (port → connect)",
    "routing changed (connect → port)",
    "touched",
    "removed",
)


def summarize(document: Mapping[str, Any]) -> Summary:
    """Reads a `pulumi preview --json` document."""
    preview = parse_preview(document)
    steps = preview.steps
    old_outputs = outputs_before(steps)
    alloc = read_allocation(steps, old_outputs)
    rows = sorted(
        instance_rows(preview, alloc, read_endpoints(preview, old_outputs)),
        key=lambda r: (_ORDER.index(r.change), r.instance),
    )
    return Summary(
        stack=_stack_name(steps),
        rows=tuple(rows),
        warnings=tuple(_warnings(preview, rows, alloc)),
        resource_changes=dict(preview.change_summary),
    )


# --- rendering ---------------------------------------------------------------------------------------------------


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _change_cell(row: InstanceChange) -> str:
    text = row.change
    if row.change in ("port changed", "port and target changed"):
        text += f" ({row.old_port} → {row.new_port})"
    if row.replaced:
        text += "; replaces " + ", ".join(row.replaced)
    if row.touched:
        text += ": " + "; ".join(row.touched)
    return text


def render(summary: Summary) -> str:
    """The Markdown comment: a heading, the table, the warnings."""
    counts: dict[str, int] = {}
    for row in summary.rows:
        if row.instance != ENTRY_ROW:
            counts[row.change] = counts.get(row.change, 0) + 1
    title = f"### ssh-gateway preview: `{summary.stack}`" if summary.stack else "### ssh-gateway preview"
    lines = [title, ""]
    if summary.rows:
        tally = ", ".join(f"{counts[c]} {c}" for c in _ORDER if c in counts) or "none changes"
        lines += [f"Instances: {tally}.", ""]
        # The routing column only where a stack has connect-mode rows: port-only summaries stay as they were.
        routed = any(row.routing == Routing.CONNECT for row in summary.rows)
        header = ["Instance", *(["Routing"] if routed else []), "Change", "Public endpoint", "Target", "NSG rules"]
        lines += ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
        for row in summary.rows:
            endpoint = f"~~`{row.endpoint}`~~" if row.change == "removed" else f"`{row.endpoint}`"
            cells = [
                f"`{row.instance}`",
                *([row.routing] if routed else []),
                _change_cell(row),
                endpoint,
                row.target,
                "; ".join(row.firewall) or "—",
            ]
            lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    else:
        lines.append("No instance gains, loses or changes a public port, target or NSG rule.")
    changed = {op: n for op, n in summary.resource_changes.items() if op != "same" and n}
    if changed:
        lines += ["", "Resources: " + ", ".join(f"{n} to {op}" for op, n in sorted(changed.items())) + "."]
    if summary.warnings:
        lines += ["", "**Warnings**", ""]
        lines += [f"- {w}" for w in summary.warnings]
    return "\n".join(lines) + "\n"


def summary_json(document: Mapping[str, Any]) -> dict[str, Any]:
    """The summary of a preview's document, as JSON."""
    return dataclasses.asdict(summarize(document))


def summary_markdown(document: Mapping[str, Any]) -> str:
    """The summary of a preview's document, as the reviewer's Markdown."""
    return render(summarize(document))
