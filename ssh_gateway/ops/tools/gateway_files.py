"""`ssh-gateway gateway-config` (ssh_gateway/ops/commands/gateway_config.py): the gateway host's files, from the
stacks' `gateway` outputs.

Pangolin creates no Traefik entry point and opens no port (docs/pangolin-api.md §2.4.1). Traefik reads entry
points only from its static configuration, at start-up, and Gerbil publishes only the ports of its `ports:`
lines in Pangolin's docker-compose.yml. So a raw TCP resource works only after both are edited by hand and the
containers restarted: Pangolin's most-asked raw-TCP problem (fosrl/pangolin #375, open: automate the entry
points; #821: raw TCP works only after editing Traefik and restarting). Each stack publishes its whole port range
(and its CONNECT port) as `gateway.traefikEntryPoints`, `gerbilPublishedPorts` and `gerbilConnectPort`, so these
files are written once per range, and adding an instance never restarts Traefik.

Two files, for one or several stacks merged:
- `traefik-entrypoints.yml`: Traefik's static `entryPoints:`, one `tcp-<port>` each (merge it into the
  `entryPoints:` of Pangolin's config/traefik/traefik_config.yml);
- `docker-compose.gerbil-ports.yml`: the gerbil service's `ports:` lines, as a Compose override file
  (`docker compose -f docker-compose.yml -f docker-compose.gerbil-ports.yml up -d`; Compose appends `ports`).
The CONNECT port of a connect-mode stack is in both, marked as such.

As `ssh-config`: the diff first (against the files in DIR), written only with `--write DIR`, a second run
changes nothing, and a port two stacks claim is refused (exit 3) with nothing written.
"""

from __future__ import annotations

import difflib
import json
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import yaml

from ssh_gateway.core.names import entry_point_name, entry_point_port
from ssh_gateway.core.outputs import parse_stack_outputs, traefik_entry_point
from ssh_gateway.ops.exit_codes import ExitCode
from ssh_gateway.ops.shared.stack_outputs import outputs_of

__all__ = ["GERBIL_FILE", "TRAEFIK_FILE", "plan", "render_diff", "write_gateway_config"]

TRAEFIK_FILE: Final = "traefik-entrypoints.yml"
GERBIL_FILE: Final = "docker-compose.gerbil-ports.yml"
_PUBLISHED: Final = re.compile(r"^(\d{1,5})(?:-(\d{1,5}))?:(\d{1,5})(?:-(\d{1,5}))?/tcp$")


class GatewayConfigError(ValueError):
    """A stack's `gateway` output is missing or malformed, or two stacks claim one port; nothing is written."""


@dataclass(frozen=True)
class StackGateway:
    """What one stack needs of the gateway host, from its `gateway` output."""

    stack: str
    entry_points: Mapping[str, Mapping[str, Any]]
    """`traefikEntryPoints`: {"tcp-40001": {"address": ":40001/tcp"}, ...}."""
    published: tuple[str, ...]
    """Gerbil's `ports:` lines: the range (`gerbilPublishedPorts`) and the CONNECT port (`gerbilConnectPort`)."""
    connect_port: int | None
    """The CONNECT port, when the stack's connect entry goes through Pangolin."""

    def ports(self) -> set[int]:
        return {_port_of(self.stack, name) for name in self.entry_points}


def _port_of(stack: str, entry_point: str) -> int:
    port = entry_point_port(entry_point)
    if port is None:
        raise GatewayConfigError(f"stack {stack}: entry point {entry_point!r} is not tcp-<port>")
    return port


def stack_gateway(stack: str, outputs: Mapping[str, Any]) -> StackGateway:
    """The stack's needs, checked: every entry point `tcp-<port>` at `:<port>/tcp`, Gerbil lines `a-b:a-b/tcp`."""
    try:
        gateway = parse_stack_outputs(outputs).gateway
    except (KeyError, TypeError, ValueError) as exc:
        raise GatewayConfigError(f"stack {stack}: not the outputs ssh-gateway writes ({exc!r})") from None
    if gateway is None:
        raise GatewayConfigError(f"stack {stack} has no gateway.traefikEntryPoints output: run `pulumi up` on it first")
    entry_points: dict[str, Mapping[str, Any]] = dict(gateway.traefik_entry_points)
    for name, entry in entry_points.items():
        wanted = traefik_entry_point(_port_of(stack, name))
        if entry != wanted:
            raise GatewayConfigError(f"stack {stack}: entry point {name} has {entry!r}, not {wanted!r}")
    published = tuple(line for line in (gateway.gerbil_published_ports, gateway.gerbil_connect_port) if line)
    for line in published:
        if _PUBLISHED.match(line) is None:
            raise GatewayConfigError(f"stack {stack}: Gerbil port line {line!r} is not 'PORT[-PORT]:PORT[-PORT]/tcp'")
    connect = gateway.gerbil_connect_port
    return StackGateway(stack, entry_points, published, int(connect.split(":")[0]) if connect else None)


@dataclass(frozen=True)
class GatewayFile:
    """One file of the plan: what it holds now (None: missing) and what it should hold."""

    path: Path
    before: str | None
    after: str

    @property
    def changed(self) -> bool:
        return self.before != self.after


def _check_claims(stacks: Sequence[StackGateway]) -> None:
    owners: dict[int, str] = {}
    for stack in stacks:
        for port in sorted(stack.ports()):
            other = owners.setdefault(port, stack.stack)
            if other != stack.stack:
                raise GatewayConfigError(
                    f"port {port} (entry point {entry_point_name(port)}) is claimed by stacks {other} and "
                    f"{stack.stack}: one gateway host cannot route it to both; give them disjoint "
                    "ssh-gateway:ports.range and connect.public.port"
                )


def _header(stacks: Sequence[StackGateway], what: str) -> str:
    names = ", ".join(s.stack for s in stacks)
    return f"# Written by `ssh-gateway gateway-config` from the gateway output of stack(s) {names}: {what}\n"


def _traefik_text(stacks: Sequence[StackGateway]) -> str:
    entries: dict[int, tuple[str, Mapping[str, Any], StackGateway]] = {}
    for stack in stacks:
        for name, entry in stack.entry_points.items():
            entries[_port_of(stack.stack, name)] = (name, entry, stack)
    lines = [
        _header(stacks, "Traefik's static entry points."),
        "# Merge under `entryPoints:` of Traefik's static configuration (Pangolin's traefik_config.yml),\n",
        "# then restart Traefik once: it reads entry points only at start-up (fosrl/pangolin #375, #821).\n",
        "entryPoints:\n",
    ]
    for port, (name, entry, stack) in sorted(entries.items()):
        role = "the CONNECT port" if port == stack.connect_port else "an instance port"
        body = yaml.safe_dump({name: dict(entry)}, default_flow_style=False, sort_keys=True)
        indented = "".join(f"  {line}\n" for line in body.splitlines())
        lines.append(f"  # stack {stack.stack}: {role}\n{indented}")
    return "".join(lines)


def _gerbil_text(stacks: Sequence[StackGateway]) -> str:
    lines = [
        _header(stacks, "the ports Gerbil publishes."),
        "# A Compose override beside Pangolin's docker-compose.yml (Compose appends these to gerbil's ports):\n",
        "#   docker compose -f docker-compose.yml -f docker-compose.gerbil-ports.yml up -d\n",
        "services:\n",
        "  gerbil:\n",
        "    ports:\n",
    ]
    for stack in stacks:
        for line in stack.published:
            role = "the CONNECT port" if stack.connect_port and line.startswith(f"{stack.connect_port}:") else "range"
            lines.append(f'      - "{line}"  # stack {stack.stack}: {role}\n')
    return "".join(lines)


def plan(directory: Path, stacks: Sequence[StackGateway]) -> list[GatewayFile]:
    """The two files for these stacks, in `directory`; GatewayConfigError when two stacks claim one port."""
    if not stacks:
        raise GatewayConfigError("no stack given")
    _check_claims(stacks)
    ordered = sorted(stacks, key=lambda s: s.stack)
    files = []
    for name, text in ((TRAEFIK_FILE, _traefik_text(ordered)), (GERBIL_FILE, _gerbil_text(ordered))):
        path = directory / name
        files.append(GatewayFile(path, path.read_text() if path.exists() else None, text))
    return files


def render_diff(files: Sequence[GatewayFile]) -> str:
    out: list[str] = []
    for file in files:
        if file.changed:
            before = (file.before or "").splitlines(keepends=True)
            fromfile = str(file.path) if file.before is not None else "/dev/null"
            out += difflib.unified_diff(before, file.after.splitlines(keepends=True), fromfile, str(file.path))
    return "".join(out)


def _apply(files: Sequence[GatewayFile]) -> list[Path]:
    written = []
    for file in files:
        if file.changed:
            file.path.parent.mkdir(parents=True, exist_ok=True)
            fresh = file.path.with_name(f".{file.path.name}.tmp")
            fresh.write_text(file.after)
            fresh.replace(file.path)  # atomic: Traefik's or Compose's reader never sees half a file
            written.append(file.path)
    return written


# --- the command ---------------------------------------------------------------------------------------------


def write_gateway_config(
    stacks: Sequence[str],
    *,
    outputs_files: Sequence[Path] = (),
    write_dir: Path | None = None,
    compare_dir: Path = Path(),
    json_output: bool = False,
) -> int:
    """`ssh-gateway gateway-config`: the stacks' gateway files, their diff against `write_dir` (or `compare_dir`),
    written into `write_dir` when given; `outputs_files`: one saved `pulumi stack output --json` per stack."""
    if outputs_files and len(outputs_files) != len(stacks):
        print("ssh-gateway: give one --outputs per --stack, in the same order", file=sys.stderr)
        return ExitCode.CANNOT_RUN
    read = []
    for i, stack in enumerate(stacks):
        try:
            outputs = outputs_of(stack, outputs_files[i] if outputs_files else None)
        except (ValueError, OSError) as exc:
            print(f"ssh-gateway: cannot read the outputs of stack {stack}: {exc}", file=sys.stderr)
            return ExitCode.CANNOT_RUN
        try:
            read.append(stack_gateway(stack, outputs))
        except GatewayConfigError as exc:
            print(f"ssh-gateway: {exc}", file=sys.stderr)
            return ExitCode.CANNOT_RUN
    directory = write_dir or compare_dir
    try:
        files = plan(directory, read)
    except GatewayConfigError as exc:
        print(f"ssh-gateway: refused, nothing written: {exc}", file=sys.stderr)
        return ExitCode.REFUSED
    sys.stdout.write(render_diff(files))
    written = _apply(files) if write_dir else []
    names = ", ".join(stacks)
    changed = [f for f in files if f.changed]
    if json_output:
        listed = [{"path": str(f.path), "changed": f.changed} for f in files]
        print(json.dumps({"stacks": list(stacks), "written": [str(p) for p in written], "files": listed}, indent=2))
    elif not changed:
        print(f"no change: the gateway files of stack(s) {names} in {directory} are up to date")
    elif written:
        print(f"wrote {', '.join(str(p) for p in written)} (stack(s) {names})")
    else:
        print(f"dry run: {len(changed)} file(s) in {directory} would change; run again with --write {directory}")
    return ExitCode.OK
