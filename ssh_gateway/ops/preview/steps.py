"""`pulumi preview --json`, read once into one model that the preview summary, the drift check and recovery's
adoption share.

The document's `steps` each carry an `op`, a `urn` and the resource's `oldState` and `newState` (`type`, `inputs`,
`outputs`, `parent`, `provider`); `diagnostics` the engine's and the program's messages; `changeSummary` the
resources by op; `config` the stack's config. Python dynamic providers that implement `diff` leave `detailedDiff`
empty in the JSON, so nothing here reads it. A field of the wrong shape reads as absent: a tool says what it can
of a preview (a failed one included) rather than fail on it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ssh_gateway.core.names import urn_type

__all__ = ["Preview", "Step", "parse_preview"]


@dataclass(frozen=True)
class ResourceState:
    """A resource as a step has it before (`oldState`) or after (`newState`)."""

    type: str
    inputs: Mapping[str, Any]
    outputs: Mapping[str, Any]
    parent: str | None
    provider: str | None
    """The provider reference, `<provider urn>::<id>`."""

    @property
    def values(self) -> Mapping[str, Any]:
        """Its inputs, else its outputs (a state read back by a refresh may hold only those)."""
        return self.inputs or self.outputs


@dataclass(frozen=True)
class Step:
    """One step of the preview: what the engine would do to one resource."""

    op: str
    """`create`, `update`, `delete`, `replace`, `create-replacement`, `delete-replaced`, `same`, `read`, ..."""
    urn: str
    old: ResourceState | None
    new: ResourceState | None
    replace_reasons: tuple[str, ...] = ()
    """The properties that force a replacement."""

    @property
    def before(self) -> Mapping[str, Any]:
        """The resource's inputs (else outputs) before the step; none for a create."""
        return self.old.values if self.old is not None else {}

    @property
    def after(self) -> Mapping[str, Any]:
        """The resource's inputs (else outputs) after the step; none for a delete."""
        return self.new.values if self.new is not None else {}

    @property
    def type(self) -> str:
        """The resource's type token: its state's, else its URN's."""
        state = self.new or self.old
        return state.type if state is not None else urn_type(self.urn)

    # The resource as the engine would register it: its state after the step, else before.

    @property
    def inputs(self) -> Mapping[str, Any]:
        state = self.new or self.old
        return state.inputs if state is not None else {}

    @property
    def parent(self) -> str | None:
        state = self.new or self.old
        return state.parent if state is not None else None

    @property
    def provider(self) -> str | None:
        """The provider reference, `<provider urn>::<id>`."""
        state = self.new or self.old
        return state.provider if state is not None else None


@dataclass(frozen=True)
class Diagnostic:
    """A message of the engine or the program: an error, a warning, or info."""

    severity: str
    message: str
    urn: str | None


@dataclass(frozen=True)
class Preview:
    """A `pulumi preview --json` document."""

    steps: tuple[Step, ...] = ()
    diagnostics: tuple[Diagnostic, ...] = ()
    change_summary: Mapping[str, int] = field(default_factory=dict)
    """The resources by op, as the engine counts them."""
    config: Mapping[str, str] = field(default_factory=dict)
    """The stack's config, `namespace:key` -> its value as text."""

    def errors(self) -> list[str]:
        """The messages of its error diagnostics."""
        return [d.message.strip() for d in self.diagnostics if d.severity == "error"]


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _state(value: Any, urn: str) -> ResourceState | None:
    if not isinstance(value, Mapping) or not value:
        return None
    return ResourceState(
        type=str(value.get("type") or urn_type(urn)),
        inputs=_mapping(value.get("inputs")),
        outputs=_mapping(value.get("outputs")),
        parent=str(value["parent"]) if value.get("parent") else None,
        provider=str(value["provider"]) if value.get("provider") else None,
    )


def _step(step: Mapping[str, Any]) -> Step:
    raw = step.get("newState") or step.get("oldState")
    urn = str(step.get("urn") or _mapping(raw).get("urn") or "")
    return Step(
        op=str(step.get("op") or ""),
        urn=urn,
        old=_state(step.get("oldState"), urn),
        new=_state(step.get("newState"), urn),
        replace_reasons=tuple(str(r) for r in step.get("replaceReasons") or ()),
    )


def parse_preview(document: Mapping[str, Any]) -> Preview:
    """The model of a `pulumi preview --json` document (its parsed JSON)."""
    summary = _mapping(document.get("changeSummary"))
    return Preview(
        steps=tuple(_step(s) for s in document.get("steps") or () if isinstance(s, Mapping)),
        diagnostics=tuple(
            Diagnostic(
                severity=str(d.get("severity") or ""),
                message=str(d.get("message") or ""),
                urn=str(d["urn"]) if d.get("urn") else None,
            )
            for d in document.get("diagnostics") or ()
            if isinstance(d, Mapping)
        ),
        change_summary={str(k): int(v) for k, v in summary.items() if isinstance(v, int | float)},
        config={str(k): str(v) for k, v in _mapping(document.get("config")).items()},
    )
