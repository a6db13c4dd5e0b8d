"""The stacks' `sshConfig` and `knownHosts` outputs in the laptop's OpenSSH files, as a managed, idempotent section.

Two layouts (`ssh-gateway ssh-config`):

- **section** (default): one block per stack in `~/.ssh/config` between `# >>> ssh-gateway STACK >>>` and
  `# <<< ssh-gateway STACK <<<`. One section per stack, not one for all: each stack is written, rewritten and
  removed on its own, so refreshing `dev` never rewrites the lines of `prod`, and a stack that fails to read
  leaves the others as they are.
- **include**: the same blocks in `~/.ssh/config.d/ssh-gateway-STACK`, and one line
  `Include ~/.ssh/config.d/ssh-gateway-*` (as an absolute path) added once at the top of `~/.ssh/config`.

New sections and the Include line go at the *top* of `~/.ssh/config`: ssh takes the first value it finds for an
option, so blocks placed below a user's `Host *` would lose their `User`/`Port` to it. A section therefore ends
with `Host *`, which gives whatever follows it back to every host, as the lines above the first `Host` were.

The known_hosts lines of a stack go to `~/.ssh/known_hosts.d/ssh-gateway-STACK`, the file the program's blocks
name in `UserKnownHostsFile` (ssh_gateway.core.trust); a block from outputs that names none gets one, after the
user's own `~/.ssh/known_hosts`, where ssh keeps the keys it learns (the managed file is rewritten every run).
Paths are written absolute, from `$HOME`: ssh expands `~` from the
password database, not from `$HOME`.

The outputs are checked before anything is written. Refused, with the stack, the host and the option named:
anything that runs a command or loads code on the laptop (`LocalCommand`, `PermitLocalCommand`,
`KnownHostsCommand`, `Match` (its `exec`), `PKCS11Provider`, `SecurityKeyProvider`, `XAuthLocation`, a
`ProxyCommand` other than the two the project generates); what hands the laptop's agent, display, environment
or ports to the instance (`ForwardAgent`, `ForwardX11`, `ForwardX11Trusted`, `SendEnv`, `RemoteForward`);
`Include`, a `UserKnownHostsFile` but the stack's own, options outside a `Host` block, and `Host` patterns (`*`, `?`,
`!`), which would reach hosts that are not the stack's.
Lines outside the managed sections are never changed: they are kept byte for byte.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from ssh_gateway.core.fields import is_host_key
from ssh_gateway.core.outputs import parse_stack_outputs
from ssh_gateway.core.ports import is_port
from ssh_gateway.core.trust import known_hosts_file
from ssh_gateway.ops.command import say_error
from ssh_gateway.ops.exit_codes import ExitCode
from ssh_gateway.ops.shared.stack_outputs import outputs_of

__all__ = [
    "Layout",
    "SshConfigError",
    "StackSsh",
    "apply",
    "check_known_hosts",
    "parse_host_blocks",
    "plan",
    "render_diff",
    "write_ssh_config",
]

_KEYWORD: Final = re.compile(r"^\s*([A-Za-z][A-Za-z0-9]*)(?:\s*=\s*|\s+)(.*?)\s*$")
_BARE_KEYWORD: Final = re.compile(r"^\s*([A-Za-z][A-Za-z0-9]*)\s*$")
_ALIAS: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_STACK: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_NET_HOST: Final = r"(?:[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?|\[[0-9A-Fa-f:.]+\])"
_PORT: Final = r"(\d{1,5})"
# The only ProxyCommands the program generates (connect mode): the HTTP CONNECT proxy as host:port, nothing else.
_PROXY_COMMANDS: Final = (
    re.compile(rf"^proxytunnel -q -p {_NET_HOST}:{_PORT} -d %h:%p$"),
    re.compile(rf"^nc -X connect -x {_NET_HOST}:{_PORT} %h %p$"),
)
_REFUSED: Final = {
    "localcommand": "runs a command on this machine after connecting",
    "permitlocalcommand": "enables LocalCommand, which runs a command on this machine",
    "knownhostscommand": "runs a command on this machine to list host keys",
    "match": "is not a Host block (Match exec runs a command on this machine)",
    "pkcs11provider": "loads a library into ssh on this machine",
    "securitykeyprovider": "loads a library into ssh on this machine",
    "xauthlocation": "names a program ssh runs on this machine",
    "include": "reads other files into this machine's ssh config",
    # Not commands, but they hand this machine's agent, display, environment or ports to the instance; a user who
    # wants them sets them in their own config (ssh then takes them, as the stack's blocks do not).
    "forwardagent": "hands this machine's ssh agent to the instance",
    "forwardx11": "hands this machine's X display to the instance",
    "forwardx11trusted": "hands this machine's X display to the instance",
    "sendenv": "sends this machine's environment variables to the instance",
    "remoteforward": "lets the instance reach ports of this machine",
}
INCLUDE_PREFIX: Final = "ssh-gateway-"


class SshConfigError(ValueError):
    """Outputs or files that cannot be used; the message names the stack, the host and the option or line."""


@dataclass(frozen=True)
class HostBlock:
    """One `Host` block of a stack's `sshConfig`, as written there."""

    aliases: tuple[str, ...]
    options: tuple[tuple[str, str], ...]
    """(keyword, arguments) in order, each as the output spells it."""


@dataclass(frozen=True)
class StackSsh:
    """What a stack gives the laptop: its `sshConfig` and `knownHosts` outputs."""

    ssh_config: str
    known_hosts: str = ""


@dataclass(frozen=True)
class FileChange:
    """One file the run would change: its text before (None: absent) and after (None: to be removed)."""

    path: Path
    before: str | None
    after: str | None
    mode: int = 0o600
    """Permissions for a file that does not exist yet."""

    @property
    def changed(self) -> bool:
        return self.before != self.after


@dataclass(frozen=True)
class Rendered:
    """A stack's blocks as written, to be read back by the real ssh before anything is written."""

    stack: str
    text: str
    aliases: tuple[str, ...]


@dataclass(frozen=True)
class Plan:
    """What a run would do."""

    changes: tuple[FileChange, ...]
    """Every file the run concerns, changed or not (so a caller can say which are already up to date)."""
    rendered: tuple[Rendered, ...]

    @property
    def changed(self) -> list[FileChange]:
        return [change for change in self.changes if change.changed]


# --- reading the outputs ------------------------------------------------------------------------------------------


def _check_option(stack: str, host: str, keyword: str, args: str) -> None:
    key = keyword.lower()
    where = f"stack {stack}, Host {host}: option {keyword}"
    if key in _REFUSED:
        raise SshConfigError(f"{where} {_REFUSED[key]}; refused (nothing was written)")
    if key == "userknownhostsfile":
        if args.strip() != known_hosts_file(stack):
            raise SshConfigError(
                f"{where} {args!r}: only {known_hosts_file(stack)}, the file ssh-gateway ssh-config writes, is "
                "allowed; refused (nothing was written)"
            )
        return
    if key == "proxycommand":
        command = " ".join(args.split())
        if command.lower() == "none":
            return
        for form in _PROXY_COMMANDS:
            match = form.match(command)
            if match and is_port(int(match[1])):
                return
        raise SshConfigError(
            f"{where} {args!r} would run on this machine; only `proxytunnel -q -p HOST:PORT -d %h:%p` and "
            "`nc -X connect -x HOST:PORT %h %p` (what ssh-gateway generates) are allowed; refused (nothing was written)"
        )


def parse_host_blocks(text: str, *, stack: str) -> list[HostBlock]:
    """The `Host` blocks of a stack's `sshConfig`; `SshConfigError` for anything that may not reach the laptop.

    Keywords are matched case-insensitively and may be separated from their arguments by `=`, as ssh reads them.
    """
    blocks: list[HostBlock] = []
    aliases: tuple[str, ...] | None = None
    options: list[tuple[str, str]] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = _KEYWORD.match(line)
        if match is None:
            bare = _BARE_KEYWORD.match(line)
            raise SshConfigError(
                f"stack {stack}: sshConfig line {number} {line!r} "
                + ("has no value" if bare else "is not `Keyword value`")
                + "; refused (nothing was written)"
            )
        keyword, args = match[1], match[2]
        if keyword.lower() == "host":
            if aliases is not None:
                blocks.append(HostBlock(aliases, tuple(options)))
            names = tuple(args.split())
            if not names:
                raise SshConfigError(f"stack {stack}: sshConfig line {number} is a Host with no name; refused")
            for name in names:
                if not _ALIAS.match(name):
                    raise SshConfigError(
                        f"stack {stack}: Host {name!r} is a pattern or not a plain host alias (letters, digits, "
                        "'.', '_', '-'); it would apply to hosts that are not the stack's; refused (nothing was "
                        "written)"
                    )
            aliases, options = names, []
            continue
        if aliases is None:
            raise SshConfigError(
                f"stack {stack}: option {keyword} (sshConfig line {number}) is outside a Host block and would apply to "
                "every host; refused (nothing was written)"
            )
        _check_option(stack, aliases[0], keyword, args)
        options.append((keyword, args))
    if aliases is not None:
        blocks.append(HostBlock(aliases, tuple(options)))
    return blocks


def check_known_hosts(text: str, *, stack: str) -> list[str]:
    """The stack's `knownHosts` lines (markers such as `@cert-authority` allowed), each checked for its form."""
    lines = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        fields = line.split()
        if fields[0] in ("@cert-authority", "@revoked"):
            fields = fields[1:]
        elif fields[0].startswith("@"):
            raise SshConfigError(f"stack {stack}: knownHosts line {number}: unknown marker {fields[0]!r}")
        if len(fields) < 3 or not is_host_key(f"{fields[1]} {fields[2]}"):
            raise SshConfigError(
                f"stack {stack}: knownHosts line {number} {line[:80]!r} is not `[marker] hosts keytype base64-key`"
            )
        lines.append(line)
    return lines


# --- rendering ----------------------------------------------------------------------------------------------------


def _quoted(path: Path) -> str:
    text = str(path)
    return f'"{text}"' if any(c.isspace() for c in text) else text


def _start(stack: str) -> str:
    return f"# >>> ssh-gateway {stack} >>>"


def _end(stack: str) -> str:
    return f"# <<< ssh-gateway {stack} <<<"


def _blocks_text(stack: str, blocks: Sequence[HostBlock], known_hosts: Sequence[Path], managed: Path) -> list[str]:
    """The blocks, with the stack's known_hosts file as an absolute path (from $HOME, which ssh's `~` is not)."""
    lines: list[str] = []
    for block in blocks:
        if lines:
            lines.append("")
        lines.append(f"Host {' '.join(block.aliases)}")
        named = False
        for keyword, args in block.options:
            if keyword.lower() == "userknownhostsfile":
                named, args = True, _quoted(managed)
            lines.append(f"    {keyword} {args}")
        if known_hosts and not named:
            lines.append(f"    UserKnownHostsFile {' '.join(_quoted(p) for p in known_hosts)}")
    if not blocks:
        lines.append(f"# stack {stack} has no instances")
    return lines


def _section(stack: str, blocks: Sequence[HostBlock], known_hosts: Sequence[Path], managed: Path) -> str:
    lines = [
        _start(stack),
        f"# Written by `ssh-gateway ssh-config --stack {stack}` from the stack's outputs; rewritten on every run.",
        *_blocks_text(stack, blocks, known_hosts, managed),
        "# End of the stack's hosts: what follows applies to every host again, as at the top of the file.",
        "Host *",
        _end(stack),
    ]
    return "\n".join(lines) + "\n"


def _include_file(stack: str, blocks: Sequence[HostBlock], known_hosts: Sequence[Path], managed: Path) -> str:
    lines = [
        f"# Written by `ssh-gateway ssh-config --include --stack {stack}` from the stack's outputs; rewritten on "
        "every run.",
        *_blocks_text(stack, blocks, known_hosts, managed),
    ]
    return "\n".join(lines) + "\n"


def _known_hosts_file(stack: str, lines: Sequence[str]) -> str:
    head = f"# Written by `ssh-gateway ssh-config --stack {stack}` from the stack's knownHosts output; rewritten on "
    head += "every run."
    return "\n".join([head, *lines]) + "\n"


# --- editing ~/.ssh/config ----------------------------------------------------------------------------------------


def _lines(text: str) -> list[str]:
    """The lines with their endings, split on `\\n` only (str.splitlines would also split on form feeds)."""
    return [line for line in re.split(r"(?<=\n)", text) if line]


def _sections(lines: Sequence[str], path: Path) -> dict[str, tuple[int, int]]:
    """Every managed section: stack -> (index of its start line, index of its end line)."""
    found: dict[str, tuple[int, int]] = {}
    open_stack: tuple[str, int] | None = None
    for index, line in enumerate(lines):
        text = line.rstrip("\r\n")
        start = re.fullmatch(r"# >>> ssh-gateway (\S+) >>>", text)
        end = re.fullmatch(r"# <<< ssh-gateway (\S+) <<<", text)
        if start:
            if open_stack is not None:
                raise SshConfigError(
                    f"{path}: line {index + 1} opens a section inside section {open_stack[0]}; fix it by hand"
                )
            if start[1] in found:
                raise SshConfigError(
                    f"{path}: two sections for stack {start[1]} (line {index + 1}); remove one by hand"
                )
            open_stack = (start[1], index)
        elif end:
            if open_stack is None or open_stack[0] != end[1]:
                raise SshConfigError(f"{path}: line {index + 1} ends a section for stack {end[1]} that is not open")
            found[end[1]] = (open_stack[1], index)
            open_stack = None
    if open_stack is not None:
        raise SshConfigError(
            f"{path}: the section of stack {open_stack[0]} (line {open_stack[1] + 1}) has no end marker "
            f"{_end(open_stack[0])!r}; fix it by hand"
        )
    return found


def _with_section(text: str, stack: str, section: str | None, path: Path) -> str:
    """`text` with stack's section replaced (or inserted at the top, after other sections; None: removed)."""
    lines = _lines(text)
    sections = _sections(lines, path)
    # A file written with CRLF endings gets its section with CRLF too.
    ending = "\r\n" if lines and lines[0].endswith("\r\n") else "\n"
    new = [] if section is None else [line.replace("\n", ending) for line in _lines(section)]
    if stack in sections:
        start, end = sections[stack]
        return "".join(lines[:start] + new + lines[end + 1 :])
    after = max((end + 1 for _, end in sections.values()), default=_include_end(lines))
    return "".join(lines[:after] + new + lines[after:])


def _include_line(home: Path) -> str:
    return f"Include {_quoted(home / '.ssh' / 'config.d' / (INCLUDE_PREFIX + '*'))}"


def _include_end(lines: Sequence[str]) -> int:
    """Index after our Include line (and its comment) when the file starts with them, else 0."""
    for index, line in enumerate(lines[:2]):
        if line.startswith("Include ") and INCLUDE_PREFIX in line:
            return index + 1
    return 0


def _with_include(text: str, home: Path) -> str:
    include = _include_line(home)
    if any(line.strip() == include for line in text.splitlines()):
        return text
    head = "# Added once by `ssh-gateway ssh-config --include`: the stacks' hosts, one file per stack.\n"
    return head + include + "\n" + text


def _aliases_in(text: str) -> set[str]:
    return {
        name
        for line in text.splitlines()
        if (match := _KEYWORD.match(line)) and match[1].lower() == "host"
        for name in match[2].split()
        if name != "*"
    }


def _other_aliases(config: str, include_dir: Path, stacks: Iterable[str], path: Path) -> dict[str, str]:
    """Aliases of the managed stacks this run does not write: alias -> stack."""
    own: dict[str, str] = {}
    written = set(stacks)
    lines = _lines(config)
    for stack, (start, end) in _sections(lines, path).items():
        own.update(dict.fromkeys(_aliases_in("".join(lines[start : end + 1])), stack))
    if include_dir.is_dir():
        for file in include_dir.glob(INCLUDE_PREFIX + "*"):
            own.update(dict.fromkeys(_aliases_in(file.read_text(errors="replace")), file.name[len(INCLUDE_PREFIX) :]))
    return {alias: stack for alias, stack in own.items() if stack not in written}


# --- the plan -----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Layout:
    """Where a home directory's managed files are."""

    home: Path

    @property
    def config(self) -> Path:
        return self.home / ".ssh" / "config"

    @property
    def include_dir(self) -> Path:
        return self.home / ".ssh" / "config.d"

    def include_file(self, stack: str) -> Path:
        return self.include_dir / f"{INCLUDE_PREFIX}{stack}"

    def known_hosts(self, stack: str) -> Path:
        """`known_hosts_file(stack)` under this home."""
        return self.home / known_hosts_file(stack).removeprefix("~/")

    @property
    def user_known_hosts(self) -> Path:
        return self.home / ".ssh" / "known_hosts"


def _read(path: Path) -> str | None:
    # surrogateescape: bytes that are not UTF-8 (a Latin-1 comment) come back out exactly as they were.
    return path.read_bytes().decode("utf-8", "surrogateescape") if path.exists() else None


def _verify_with_ssh(plan: Plan, ssh: str) -> None:
    """Has the real ssh read every stack's blocks? An option it does not know would break every ssh command."""
    for rendered in plan.rendered:
        if not rendered.aliases:
            continue
        with tempfile.NamedTemporaryFile("w", suffix=".ssh_config") as file:
            file.write(rendered.text)
            file.flush()
            result = subprocess.run(  # noqa: S603 - the ssh client only parses the file (-G), argv built here
                [ssh, "-G", "-F", file.name, rendered.aliases[0]],
                capture_output=True,
                text=True,
                timeout=30,
                check=False,
            )
        if result.returncode != 0:
            lines = result.stderr.strip().splitlines()
            said = lines[-1] if lines else f"exit {result.returncode}"
            raise SshConfigError(
                f"stack {rendered.stack}: ssh cannot read its Host blocks ({said}); refused (nothing was written)"
            )


def plan(home: Path, stacks: Mapping[str, StackSsh | None], *, include: bool) -> Plan:
    """The files to change so that each stack is written as `include` says (None: removed), and nothing else."""
    layout = Layout(home)
    for stack in stacks:
        if not _STACK.match(stack):
            raise SshConfigError(f"stack name {stack!r}: use the short name (letters, digits, '.', '_', '-')")
    config_before = _read(layout.config)
    config = config_before or ""
    others = _other_aliases(config, layout.include_dir, stacks, layout.config)
    seen: dict[str, str] = {}
    changes: list[FileChange] = []
    rendered: list[Rendered] = []
    for stack, outputs in stacks.items():
        kh_path, include_path = layout.known_hosts(stack), layout.include_file(stack)
        if outputs is None:
            changes += [FileChange(kh_path, _read(kh_path), None), FileChange(include_path, _read(include_path), None)]
            config = _with_section(config, stack, None, layout.config)
            continue
        blocks = parse_host_blocks(outputs.ssh_config, stack=stack)
        known = check_known_hosts(outputs.known_hosts, stack=stack)
        aliases = [alias for block in blocks for alias in block.aliases]
        for alias in aliases:
            owner = seen.get(alias) or others.get(alias)
            if owner is not None:
                raise SshConfigError(
                    f"stack {stack}: Host {alias} is also a host of stack {owner}; ssh would use only the first"
                )
            seen[alias] = stack
        files = [layout.user_known_hosts, kh_path] if known else []
        changes.append(FileChange(kh_path, _read(kh_path), _known_hosts_file(stack, known) if known else None))
        if include:
            text = _include_file(stack, blocks, files, kh_path)
            changes.append(FileChange(include_path, _read(include_path), text))
            config = _with_section(config, stack, None, layout.config)
        else:
            text = _section(stack, blocks, files, kh_path)
            changes.append(FileChange(include_path, _read(include_path), None))
            config = _with_section(config, stack, text, layout.config)
        rendered.append(Rendered(stack, text, tuple(aliases)))
    if include:
        config = _with_include(config, home)
    config_after = None if config_before is None and not config else config
    every = [FileChange(layout.config, config_before, config_after), *changes]
    return Plan(tuple(c for c in every if c.before is not None or c.after is not None), tuple(rendered))


def _shown(path: Path, home: Path) -> str:
    try:
        return "~/" + str(path.relative_to(home))
    except ValueError:
        return str(path)


def render_diff(changes: Sequence[FileChange], home: Path) -> str:
    """A unified diff of every change, labelled with `~/`-relative paths."""
    out: list[str] = []
    for change in changes:
        if not change.changed:
            continue
        name = _shown(change.path, home)
        out += difflib.unified_diff(
            _lines(change.before or ""),
            _lines(change.after or ""),
            fromfile=name if change.before is not None else "/dev/null",
            tofile=name if change.after is not None else "/dev/null",
        )
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in out)


def _write(path: Path, text: str, mode: int) -> None:
    """Atomically: a hidden temporary file beside it (the Include glob never sees it), then rename."""
    target = Path(os.path.realpath(path))  # a dotfile manager's symlink stays a symlink
    target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    keep = target.stat().st_mode & 0o7777 if target.exists() else mode
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(text.encode("utf-8", "surrogateescape"))
            file.flush()
            os.fsync(file.fileno())
        os.chmod(tmp, keep)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def apply(changes: Sequence[FileChange]) -> list[Path]:
    """Writes (or removes) every changed file; returns the paths it touched."""
    touched = []
    for change in changes:
        if not change.changed:
            continue
        if change.after is None:
            change.path.unlink(missing_ok=True)
        else:
            _write(change.path, change.after, change.mode)
        touched.append(change.path)
    return touched


# --- the command: `ssh-gateway ssh-config` ---------------------------------------------------------------------


def _read_stacks(
    stacks: Sequence[str], *, outputs_file: Path | None, ambient: bool, remove: bool
) -> dict[str, StackSsh | None] | None:
    """Each stack's sshConfig and knownHosts outputs (None: its section goes); None, said, when one cannot be read."""
    read: dict[str, StackSsh | None] = {}
    for stack in stacks:
        if remove:
            read[stack] = None
            continue
        try:
            outputs = outputs_of(stack, outputs_file, ambient=ambient)
        except (ValueError, OSError) as exc:
            say_error(f"cannot read the outputs of stack {stack}: {exc}")
            return None
        try:
            parsed = parse_stack_outputs(outputs)
        except (KeyError, TypeError, ValueError) as exc:
            say_error(f"cannot read the outputs of stack {stack}: not the outputs ssh-gateway writes ({exc!r})")
            return None
        if not parsed.has_ssh_config:
            say_error(f"stack {stack} has no sshConfig output: run `pulumi up` on it first")
            return None
        read[stack] = StackSsh(parsed.ssh_config, parsed.known_hosts)
    return read


def write_ssh_config(
    stacks: Sequence[str],
    *,
    outputs_file: Path | None = None,
    ambient: bool = False,
    write: bool = False,
    include: bool = False,
    remove: bool = False,
    json_output: bool = False,
) -> int:
    """`ssh-gateway ssh-config`: the stacks' sections (`include`: files) in $HOME's ~/.ssh, their diff shown and,
    with `write`, written; `remove` takes them out. `outputs_file`: one stack's saved `pulumi stack output --json`."""
    if outputs_file is not None and len(stacks) != 1:
        say_error("--outputs holds one stack's outputs: give exactly one --stack with it")
        return ExitCode.CANNOT_RUN
    home = Path.home()  # $HOME, which the tests point at a temporary directory
    read = _read_stacks(stacks, outputs_file=outputs_file, ambient=ambient, remove=remove)
    if read is None:
        return ExitCode.CANNOT_RUN
    try:
        planned = plan(home, read, include=include)
        ssh = shutil.which("ssh")
        if ssh is not None:  # without an ssh client here, nothing would read the file anyway
            _verify_with_ssh(planned, ssh)
    except SshConfigError as exc:
        say_error(str(exc))
        return ExitCode.REFUSED
    written = apply(planned.changed) if write else []
    if json_output:
        print(json.dumps(_json_report(planned, home, list(read), include=include, written=written), indent=2))
    else:
        _say_what_changed(planned, home, ", ".join(stacks), written=written)
    return ExitCode.OK


def _json_report(planned: Plan, home: Path, stacks: list[str], *, include: bool, written: list[Path]) -> dict[str, Any]:
    files = [
        {"path": str(c.path), "changed": c.changed, "removed": c.after is None, "diff": render_diff([c], home)}
        for c in planned.changes
    ]
    layout = "include" if include else "section"
    return {"stacks": stacks, "layout": layout, "written": bool(written), "files": files}


def _say_what_changed(planned: Plan, home: Path, names: str, *, written: list[Path]) -> None:
    changed = planned.changed
    sys.stdout.write(render_diff(changed, home))
    if not changed:
        shown = ", ".join(_shown(c.path, home) for c in planned.changes)
        print(f"no change: the ssh config of stack(s) {names} is up to date ({shown})")
    elif written:
        removed = {c.path for c in changed if c.after is None}
        wrote = ", ".join(_shown(p, home) for p in written if p not in removed)
        gone = ", ".join(_shown(p, home) for p in written if p in removed)
        done = "; ".join(part for part in (wrote and f"wrote {wrote}", gone and f"removed {gone}") if part)
        print(f"{done} (stack(s) {names})")
    else:
        print(f"dry run: {len(changed)} file(s) would change; run again with --write to apply")
