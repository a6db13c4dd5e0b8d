"""Adding and removing instances in `stacks/Pulumi.<stack>.yaml` without touching anything else in the file.

This is the seam a platform's provisioning calls (`ssh-gateway instances add|remove|list`, or these functions
from Python). The file is read with ruamel.yaml's round-trip loader, which knows where every node starts; the
edit is then made on the text itself: the new entry's lines go after the last entry, a removed entry's lines
(with the comment lines just above it) are cut out. Every other byte stays as it was, comments and order
included, which a dump of the edited tree would not guarantee (ruamel attaches a comment to the node before it,
so removing an entry would take the next entry's comment with it).

Before anything is written the whole resulting config is read by the program's own reader
(`ssh_gateway.core.settings.read_stack_file`), so an edit the program would refuse is refused here, with the key
and the value named, and the file stays unchanged byte for byte.
"""

from __future__ import annotations

import difflib
import io
import json
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import YAMLError

from ssh_gateway.core.settings import INSTANCE_KEYS, Settings, SettingsError, read_stack_file, stack_file_config
from ssh_gateway.ops.command import say_error
from ssh_gateway.ops.exit_codes import ExitCode
from ssh_gateway.plumbing.toolchain import REPO

__all__ = [
    "INSTANCE_KEYS",
    "InstanceError",
    "add_instance",
    "described",
    "edit_stack_instances",
    "list_instances",
    "list_stack_instances",
    "remove_instance",
    "validate",
]

INSTANCES_KEY: Final = "ssh-gateway:instances"


class InstanceError(ValueError):
    """An edit that is refused; the file is unchanged. The message names the key and the value."""


@dataclass(frozen=True)
class _Doc:
    """A stack file: its lines (with their endings) and ruamel's round-trip tree of it."""

    lines: list[str]
    tree: Any

    @property
    def config(self) -> CommentedMap | None:
        config = self.tree.get("config") if isinstance(self.tree, CommentedMap) else None
        return config if isinstance(config, CommentedMap) else None


def _yaml() -> YAML:
    yaml = YAML(typ="rt")
    yaml.width = 4096  # never fold a long value (a host key) onto two lines
    return yaml


def _load(text: str) -> _Doc:
    try:
        tree = _yaml().load(text)
    except YAMLError as exc:
        raise InstanceError(f"not valid YAML: {exc}") from None
    if tree is not None and not isinstance(tree, CommentedMap):
        raise InstanceError("not a Pulumi stack file: its top level is not a mapping")
    return _Doc([line for line in re.split(r"(?<=\n)", text) if line], tree)


def validate(text: str) -> Settings:
    """The settings a stack file gives the program (the one reader's); `InstanceError` naming each bad key and value."""
    try:
        return read_stack_file(text)
    except SettingsError as exc:
        raise InstanceError(str(exc)) from None


def list_instances(text: str) -> list[dict[str, Any]]:
    """The `ssh-gateway:instances` entries as written (plain values, in file order)."""
    try:
        entries = stack_file_config(text).get(INSTANCES_KEY)
    except SettingsError as exc:
        raise InstanceError(str(exc)) from None
    return [entry for entry in entries or [] if isinstance(entry, dict)]


# --- where things are in the text ------------------------------------------------------------------------------


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _is_comment_or_blank(line: str) -> bool:
    return not line.strip() or line.lstrip().startswith("#")


def _dash_line(doc: _Doc, seq: CommentedSeq, index: int) -> tuple[int, int]:
    """(line, column) of the `-` of entry `index`: on the entry's first line, or alone on a line above it."""
    line, col = seq.lc.item(index)
    before = doc.lines[line][:col]
    if before.rstrip().endswith("-"):
        return line, before.rstrip().rindex("-")
    for above in range(line - 1, -1, -1):
        if doc.lines[above].strip() == "-":
            return above, doc.lines[above].index("-")
    raise InstanceError(f"cannot find the '-' of {INSTANCES_KEY}[{index}]")  # pragma: no cover - YAML guarantees one


def _lead(doc: _Doc, line: int) -> int:
    """The first of the comment lines directly above `line` (they describe the entry that starts there)."""
    while line > 0 and doc.lines[line - 1].strip().startswith("#"):
        line -= 1
    return line


def _last_entry_end(doc: _Doc, seq: CommentedSeq) -> int:
    """Index after the last line of the last entry: its deeper-indented lines, not the comments after it."""
    start, dash = _dash_line(doc, seq, len(seq) - 1)
    end = start + 1
    for index in range(start + 1, len(doc.lines)):
        line = doc.lines[index]
        if not _is_comment_or_blank(line) and _indent(line) <= dash:
            break
        if not _is_comment_or_blank(line) or (line.strip() and _indent(line) > dash):
            end = index + 1
    return end


def _entry_lines(entry: Mapping[str, Any], *, dash: int, key: int) -> list[str]:
    """The new entry's lines: `-` at column `dash`, its keys at column `key`, lists and maps in flow style."""
    node = CommentedMap()
    for name, value in entry.items():
        if isinstance(value, Mapping):
            value = CommentedMap(value)
            value.fa.set_flow_style()
        elif isinstance(value, (list, tuple)):
            value = CommentedSeq(value)
            value.fa.set_flow_style()
        node[name] = value
    out = io.StringIO()
    _yaml().dump(node, out)
    lines = out.getvalue().splitlines()
    first = " " * dash + "-" + " " * (key - dash - 1) + lines[0]
    return [first + "\n", *(" " * key + line + "\n" for line in lines[1:])]


# --- the edits -------------------------------------------------------------------------------------------------


def _checked(after: str, expected: list[dict[str, Any]]) -> str:
    """`after`, once the settings model accepts it and it holds exactly the entries meant (a guard on the splice)."""
    validate(after)
    if list_instances(after) != expected:  # pragma: no cover - would be a bug in the line arithmetic above
        raise InstanceError(f"the edit of {INSTANCES_KEY} did not come out as intended; nothing was written")
    return after


def add_instance(text: str, entry: Mapping[str, Any]) -> str:
    """`text` with `entry` (keys as in `INSTANCE_KEYS`) appended to `ssh-gateway:instances`; validated."""
    unknown = sorted(set(entry) - set(INSTANCE_KEYS))
    if unknown:
        raise InstanceError(
            f"{INSTANCES_KEY}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(INSTANCE_KEYS)}"
        )
    name = entry.get("name")
    if any(existing.get("name") == name for existing in list_instances(text)):
        raise InstanceError(f"{INSTANCES_KEY}: an instance named {json.dumps(name)} already exists")
    ordered = {key: entry[key] for key in INSTANCE_KEYS if key in entry and entry[key] is not None}
    doc = _load(text)
    lines = list(doc.lines)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    config = doc.config
    if config is None:
        if doc.tree is not None and "config" in doc.tree:
            raise InstanceError("config: is not a block mapping; write it as `config:` with one key per line")
        lines += ["config:\n", f"  {INSTANCES_KEY}:\n", *_entry_lines(ordered, dash=4, key=6)]
    elif INSTANCES_KEY not in config:
        key_col = int(config.lc.key(next(iter(config)))[1]) if config else 2
        after = _config_end(doc)
        new = [" " * key_col + f"{INSTANCES_KEY}:\n", *_entry_lines(ordered, dash=key_col + 2, key=key_col + 4)]
        lines[after:after] = new
    else:
        seq = config[INSTANCES_KEY]
        key_line, key_col = config.lc.key(INSTANCES_KEY)
        if seq is None or (isinstance(seq, CommentedSeq) and len(seq) == 0):
            if seq is not None:  # `[]`: drop it from the key's line, keeping a comment after it
                line, col = config.lc.value(INSTANCES_KEY)
                lines[line] = lines[line][:col].rstrip() + lines[line][col + 2 :]
                lines[line] = lines[line] if lines[line].endswith("\n") else lines[line] + "\n"
            lines[key_line + 1 : key_line + 1] = _entry_lines(ordered, dash=key_col + 2, key=key_col + 4)
        elif isinstance(seq, CommentedSeq) and not seq.fa.flow_style():
            _, dash = _dash_line(doc, seq, 0)
            key = int(seq.lc.item(0)[1])
            end = _last_entry_end(doc, seq)
            lines[end:end] = _entry_lines(ordered, dash=dash, key=key)
        else:
            raise InstanceError(
                f"{INSTANCES_KEY} is not a block list (`- name: ...` entries); write it as one to edit it here"
            )
    return _checked("".join(lines), [*list_instances(text), json.loads(json.dumps(ordered))])


def _config_end(doc: _Doc) -> int:
    """Index after the last line of `config:`: before the next top-level key and the comments above it."""
    keys = list(doc.tree)
    position = keys.index("config")
    if position + 1 < len(keys):
        end = _lead(doc, int(doc.tree.lc.key(keys[position + 1])[0]))
    else:
        end = len(doc.lines)
    while end > 0 and not doc.lines[end - 1].strip():
        end -= 1
    return end


def remove_instance(text: str, name: str) -> str:
    """`text` without the entry named `name` (and the comment lines just above it); validated."""
    doc = _load(text)
    config = doc.config
    seq = config.get(INSTANCES_KEY) if config is not None else None
    names = [str(e.get("name")) for e in seq or [] if isinstance(e, Mapping)]
    if config is None or not isinstance(seq, CommentedSeq) or name not in names:
        have = ", ".join(names) or "none"
        raise InstanceError(f"{INSTANCES_KEY}: no instance named {json.dumps(name)} (instances: {have})")
    if seq.fa.flow_style():
        raise InstanceError(f"{INSTANCES_KEY} is not a block list (`- name: ...` entries); write it as one to edit it")
    index = names.index(name)
    start = _lead(doc, _dash_line(doc, seq, index)[0])
    end = _lead(doc, _dash_line(doc, seq, index + 1)[0]) if index + 1 < len(seq) else _last_entry_end(doc, seq)
    lines = doc.lines[:start] + doc.lines[end:]
    if len(seq) == 1:  # the list is now empty: say so, or the key would read as null
        key_line = int(config.lc.key(INSTANCES_KEY)[0])
        match = re.match(r"^(\s*[\"']?" + re.escape(INSTANCES_KEY) + r"[\"']?\s*:)(.*)$", lines[key_line], re.S)
        if match is None:
            raise InstanceError(f"cannot find the line of {INSTANCES_KEY}")  # pragma: no cover
        lines[key_line] = match[1] + " []" + match[2]
    return _checked("".join(lines), [e for e in list_instances(text) if e.get("name") != name])


def described(entries: Sequence[Mapping[str, Any]]) -> list[str]:
    """One line per instance for `instances list`."""
    rows = [("NAME", "USER", "TARGET", "PORT", "DETAIL")]
    for entry in entries:
        target = str(entry.get("target", "nodePort"))
        detail = f"{entry.get('staticHost')}:{entry.get('staticPort')}" if target == "static" else ""
        if entry.get("sourceCidrs"):
            detail = (detail + " " if detail else "") + "from " + ",".join(map(str, entry["sourceCidrs"]))
        port = str(entry["port"]) + " (pinned)" if entry.get("port") else "allocated"
        rows.append((str(entry.get("name")), str(entry.get("user", "root")), target, port, detail))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows]


# --- the command: `ssh-gateway instances` on stacks/Pulumi.<stack>.yaml -------------------------------------------


@dataclass(frozen=True)
class _StackFile:
    path: Path
    shown: str
    """Its path from the repo's root, as messages and diffs name it."""
    text: str


def _stack_file(stack: str) -> _StackFile | None:
    from ssh_gateway.ops.shared.automation import stack_file

    path = stack_file(stack)
    shown = str(path.relative_to(REPO))
    if not path.exists():
        say_error(f"{shown} does not exist: no stack {stack!r} in stacks/")
        return None
    return _StackFile(path, shown, path.read_bytes().decode("utf-8"))


def list_stack_instances(stack: str, *, json_output: bool = False) -> int:
    """`ssh-gateway instances list`: the stack file's instances, as a table or JSON."""
    file = _stack_file(stack)
    if file is None:
        return ExitCode.CANNOT_RUN
    try:
        entries = list_instances(file.text)
    except InstanceError as exc:
        say_error(f"refused, {file.shown} is unchanged: {exc}")
        return ExitCode.REFUSED
    print(json.dumps(entries, indent=2) if json_output else "\n".join(described(entries)))
    return ExitCode.OK


def edit_stack_instances(
    stack: str,
    edit: Callable[[str], str],
    *,
    dry_run: bool = False,
    preview: bool = True,
    json_output: bool = False,
) -> int:
    """`ssh-gateway instances add|remove`: the stack file edited by `edit` (`add_instance` or `remove_instance` of
    its text), its diff shown, written unless `dry_run`, then the preview of the change unless not `preview`."""
    file = _stack_file(stack)
    if file is None:
        return ExitCode.CANNOT_RUN
    try:
        after = edit(file.text)
    except InstanceError as exc:
        say_error(f"refused, {file.shown} is unchanged: {exc}")
        return ExitCode.REFUSED
    diff = "".join(difflib.unified_diff(file.text.splitlines(True), after.splitlines(True), file.shown, file.shown))
    if not dry_run:
        file.path.write_bytes(after.encode("utf-8"))
    report: dict[str, Any] = {"stack": stack, "file": file.shown, "written": not dry_run, "diff": diff}
    if not json_output:
        sys.stdout.write(diff)
        print(f"{'dry run, not written' if dry_run else 'wrote'}: {file.shown}")
    if dry_run or not preview:
        if json_output:
            print(json.dumps(report, indent=2))
        return ExitCode.OK
    return _show_preview(stack, file.shown, report, json_output=json_output)


def _show_preview(stack: str, shown: str, report: Mapping[str, Any], *, json_output: bool) -> int:
    from ssh_gateway.ops.preview.run import run_preview
    from ssh_gateway.ops.preview.summary import summary_json, summary_markdown

    if not json_output:
        print(f"==> pulumi preview --stack {stack} (the change as a reviewer sees it)", flush=True)
    preview = run_preview(stack)
    if preview.document is None:
        say_error(f"{shown} was written, but its preview printed no JSON (exit code {preview.code})")
        return ExitCode.CANNOT_RUN
    if json_output:
        print(json.dumps({**report, "previewExitCode": preview.code, "preview": summary_json(preview.document)}))
    else:
        sys.stdout.write(summary_markdown(preview.document))
    return ExitCode.OK if preview.code == 0 else ExitCode.FAILED
