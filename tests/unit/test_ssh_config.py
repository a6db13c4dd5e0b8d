"""The managed ssh config: what is refused from stack outputs, and the files a run writes into a temporary HOME.

The real `ssh -G` reading these files is in tests/integration/test_cli.py (this layer starts no process).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from ssh_gateway.ops.tools.ssh_files import (
    SshConfigError,
    StackSsh,
    apply,
    check_known_hosts,
    parse_host_blocks,
    plan,
    render_diff,
)

pytestmark = pytest.mark.unit

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAi5LozFLqWuY6k4TyD1C+Oys0CW2N2WqpjyAxjMsw+d"
DEV = StackSsh(
    "Host ssh-gpu-alice\n    HostName ssh-gpu-alice.dev.example.com\n    Port 40001\n    User alice\n\n"
    "Host ssh-gpu-bob\n    HostName ssh-gpu-bob.dev.example.com\n    Port 40002\n    User bob\n",
    f"[ssh-gpu-alice.dev.example.com]:40001 {KEY}\n@cert-authority *.dev.example.com {KEY}",
)
PROD = StackSsh(
    "Host ssh-gpu-research-01\n    HostName ssh-gpu-research-01.example.com\n    Port 41010\n    User ubuntu\n"
)
# What the user had before: global options first, a Host of their own, bytes that are not UTF-8, no final newline.
USER_CONFIG = b"ServerAliveInterval 60\n# caf\xe9 wifi\nHost mine\n    User me\n    Port 2200"


def _home(tmp_path: Path, config: bytes | None = USER_CONFIG) -> Path:
    (tmp_path / ".ssh").mkdir(mode=0o700)
    if config is not None:
        (tmp_path / ".ssh" / "config").write_bytes(config)
    return tmp_path


def _write(home: Path, stacks: dict[str, StackSsh | None], *, include: bool = False) -> list[Path]:
    return apply(plan(home, stacks, include=include).changed)


# --- what the outputs may contain ---------------------------------------------------------------------------------


def test_keywords_are_read_case_insensitively_with_equals_separators() -> None:
    blocks = parse_host_blocks(
        "host ssh-a\n  HOSTNAME=gw.example.com\n  port = 40001\n\tUser\talice\n# a comment\n"
        "Host=ssh-b\n  ProxyCommand=nc -X connect -x proxy.example.com:3128 %h %p\n  HostKeyAlias ssh-b\n",
        stack="dev",
    )
    assert [(b.aliases, b.options) for b in blocks] == [
        (("ssh-a",), (("HOSTNAME", "gw.example.com"), ("port", "40001"), ("User", "alice"))),
        (("ssh-b",), (("ProxyCommand", "nc -X connect -x proxy.example.com:3128 %h %p"), ("HostKeyAlias", "ssh-b"))),
    ]


@pytest.mark.parametrize(
    "command",
    [
        "proxytunnel -q -p gw.example.com:443 -d %h:%p",
        "proxytunnel  -q  -p 203.0.113.7:8443 -d %h:%p",
        "nc -X connect -x [2001:db8::1]:3128 %h %p",
        "none",
    ],
)
def test_the_proxy_commands_the_project_generates_are_allowed(command: str) -> None:
    (block,) = parse_host_blocks(f"Host ssh-a\n  ProxyCommand {command}\n", stack="dev")
    assert block.options == (("ProxyCommand", command),)


@pytest.mark.parametrize(
    ("line", "option", "why"),
    [
        ("LocalCommand touch /tmp/x", "LocalCommand", "runs a command on this machine"),
        ("localcommand=touch /tmp/x", "localcommand", "runs a command on this machine"),
        ("PermitLocalCommand yes", "PermitLocalCommand", "enables LocalCommand"),
        ("KnownHostsCommand /bin/cat %H", "KnownHostsCommand", "runs a command on this machine"),
        ('Match exec "curl x | sh"', "Match", "Match exec runs a command"),
        ("Include /tmp/other", "Include", "reads other files"),
        ("PKCS11Provider /tmp/evil.so", "PKCS11Provider", "loads a library"),
        ("SecurityKeyProvider /tmp/evil.so", "SecurityKeyProvider", "loads a library"),
        ("XAuthLocation /tmp/x", "XAuthLocation", "names a program"),
        ("UserKnownHostsFile /dev/null", "UserKnownHostsFile", "only ~/.ssh/known_hosts.d/ssh-gateway-dev"),
        ("ForwardAgent yes", "ForwardAgent", "hands this machine's ssh agent to the instance"),
        ("SendEnv AWS_*", "SendEnv", "sends this machine's environment variables"),
        ("RemoteForward 8080 localhost:80", "RemoteForward", "lets the instance reach ports of this machine"),
        ("ProxyCommand sh -c 'curl x | sh'", "ProxyCommand", "only `proxytunnel -q -p HOST:PORT -d %h:%p`"),
        ("ProxyCommand proxytunnel -q -p gw:443 -d %h:%p; touch /tmp/x", "ProxyCommand", "would run"),
        ("ProxyCommand proxytunnel -q -p $(id):443 -d %h:%p", "ProxyCommand", "would run"),
        ("ProxyCommand nc -X connect -x gw:99999 %h %p", "ProxyCommand", "would run"),
        ("proxycommand=nc -X 5 -x gw:1080 %h %p", "proxycommand", "would run"),
    ],
)
def test_options_that_would_run_commands_are_refused_naming_stack_host_and_option(
    line: str, option: str, why: str
) -> None:
    with pytest.raises(SshConfigError) as refused:
        parse_host_blocks(f"Host ssh-ok\n  Port 1\nHost ssh-gpu-eve\n  User eve\n  {line}\n", stack="dev")
    message = str(refused.value)
    assert message.startswith(f"stack dev, Host ssh-gpu-eve: option {option} ")
    assert why in message
    assert "refused (nothing was written)" in message


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Port 22\nHost ssh-a\n", "option Port (sshConfig line 1) is outside a Host block"),
        ("Host *\n  User root\n", "Host '*' is a pattern"),
        ("Host ssh-*\n  User root\n", "Host 'ssh-*' is a pattern"),
        ("Host ssh-a !ssh-b\n", "Host '!ssh-b' is a pattern"),
        ('Host "ssh-a"\n', "Host '\"ssh-a\"' is a pattern"),
        ("Host ssh-a\n  Port\n", "line 2 'Port' has no value"),
        ("Host =\n  Port 1\n", "line 1 is a Host with no name"),
        ('Host ssh-a\n  "LocalCommand" x\n', "is not `Keyword value`"),
    ],
)
def test_blocks_that_would_reach_other_hosts_or_cannot_be_read_are_refused(text: str, expected: str) -> None:
    with pytest.raises(SshConfigError, match=r"^stack dev: ") as refused:
        parse_host_blocks(text, stack="dev")
    assert expected in str(refused.value)


def test_known_hosts_lines_take_markers_and_refuse_anything_else() -> None:
    lines = check_known_hosts(f"\n[h]:40001 {KEY}\n@cert-authority *.example.com {KEY}\n# note\n", stack="dev")
    assert lines == [f"[h]:40001 {KEY}", f"@cert-authority *.example.com {KEY}"]
    for bad in ("h ssh-ed25519", f"@trusted h {KEY}", "h ssh-foo AAAA", "h ssh-ed25519 not;base64"):
        with pytest.raises(SshConfigError, match=r"^stack dev: knownHosts line 1"):
            check_known_hosts(bad, stack="dev")


# --- the files ----------------------------------------------------------------------------------------------------


def test_a_section_goes_at_the_top_and_every_other_byte_stays(tmp_path: Path) -> None:
    home = _home(tmp_path)
    written = _write(home, {"dev": DEV})

    config = (home / ".ssh" / "config").read_bytes()
    known_hosts = home / ".ssh" / "known_hosts.d" / "ssh-gateway-dev"
    assert written == [home / ".ssh" / "config", known_hosts]
    assert config.endswith(b"# <<< ssh-gateway dev <<<\n" + USER_CONFIG)
    section = config[: -len(USER_CONFIG)].decode()
    assert section.startswith("# >>> ssh-gateway dev >>>\n")
    uk = f"    UserKnownHostsFile {home}/.ssh/known_hosts {known_hosts}"
    assert "Host ssh-gpu-alice\n    HostName ssh-gpu-alice.dev.example.com\n    Port 40001\n    User alice\n" + uk in (
        section
    )
    assert section.count(uk) == 2  # each block of the stack names the stack's known_hosts file
    # The user's global options that follow apply to every host again.
    assert section.endswith("Host *\n# <<< ssh-gateway dev <<<\n")
    assert known_hosts.read_text().splitlines()[1:] == [
        f"[ssh-gpu-alice.dev.example.com]:40001 {KEY}",
        f"@cert-authority *.dev.example.com {KEY}",
    ]
    assert stat.S_IMODE(known_hosts.stat().st_mode) == 0o600
    assert stat.S_IMODE(known_hosts.parent.stat().st_mode) == 0o700


def test_a_second_run_changes_nothing(tmp_path: Path) -> None:
    home = _home(tmp_path)
    _write(home, {"dev": DEV})
    before = {p: p.read_bytes() for p in home.rglob("*") if p.is_file()}
    again = plan(home, {"dev": DEV}, include=False)
    assert again.changed == []
    assert [c.path for c in again.changes] == [
        home / ".ssh" / "config",
        home / ".ssh" / "known_hosts.d" / "ssh-gateway-dev",
    ]
    assert _write(home, {"dev": DEV}) == []
    assert {p: p.read_bytes() for p in home.rglob("*") if p.is_file()} == before


def test_a_changed_stack_rewrites_only_its_own_section(tmp_path: Path) -> None:
    home = _home(tmp_path)
    _write(home, {"dev": DEV, "prod": PROD})
    config = home / ".ssh" / "config"
    first = config.read_text(errors="surrogateescape")
    assert first.index(">>> ssh-gateway dev >>>") < first.index(">>> ssh-gateway prod >>>")

    moved = StackSsh(DEV.ssh_config.replace("Port 40002", "Port 40007"), DEV.known_hosts)
    changes = plan(home, {"dev": moved}, include=False)
    diff = render_diff(changes.changed, home)
    assert diff.startswith("--- ~/.ssh/config\n+++ ~/.ssh/config\n")
    assert "-    Port 40002\n+    Port 40007\n" in diff
    assert diff.count("\n-") == 1 and diff.count("\n+") == 2  # one line out, one in (the headers aside)
    apply(changes.changed)
    prod_section = first[first.index("# >>> ssh-gateway prod") : first.index("# <<< ssh-gateway prod <<<\n")]
    assert prod_section in config.read_text(errors="surrogateescape")


def test_a_new_file_and_a_missing_ssh_dir_are_made_private(tmp_path: Path) -> None:
    _write(tmp_path, {"prod": PROD})
    config = tmp_path / ".ssh" / "config"
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    assert stat.S_IMODE(config.parent.stat().st_mode) == 0o700
    assert "UserKnownHostsFile" not in config.read_text()  # prod pins no host key: ssh's own known_hosts apply
    assert not (tmp_path / ".ssh" / "known_hosts.d").exists()


def test_include_layout_adds_one_include_line_once_and_moves_the_section_out(tmp_path: Path) -> None:
    home = _home(tmp_path)
    _write(home, {"dev": DEV})
    _write(home, {"dev": DEV, "prod": PROD}, include=True)
    config = (home / ".ssh" / "config").read_bytes()
    include = f"Include {home}/.ssh/config.d/ssh-gateway-*\n".encode()
    assert config.endswith(include + USER_CONFIG)  # dev's section is gone; the user's bytes are as they were
    assert config.count(b"Include") == 1
    assert b">>> ssh-gateway" not in config
    dev = (home / ".ssh" / "config.d" / "ssh-gateway-dev").read_text()
    assert "Host ssh-gpu-bob\n    HostName ssh-gpu-bob.dev.example.com\n" in dev
    assert "Host *" not in dev  # an included file's Host context does not leak into the including file
    assert _write(home, {"dev": DEV, "prod": PROD}, include=True) == []
    # And back: the section returns, the stack's include file goes.
    _write(home, {"dev": DEV})
    assert not (home / ".ssh" / "config.d" / "ssh-gateway-dev").exists()
    assert (home / ".ssh" / "config.d" / "ssh-gateway-prod").exists()


def test_remove_takes_out_the_section_and_the_known_hosts_file(tmp_path: Path) -> None:
    home = _home(tmp_path)
    _write(home, {"dev": DEV, "prod": PROD})
    _write(home, {"dev": None, "prod": None})
    assert (home / ".ssh" / "config").read_bytes() == USER_CONFIG
    assert not (home / ".ssh" / "known_hosts.d" / "ssh-gateway-dev").exists()


def test_crlf_files_keep_their_line_endings(tmp_path: Path) -> None:
    home = _home(tmp_path, b"Host mine\r\n    User me\r\n")
    _write(home, {"prod": PROD})
    config = (home / ".ssh" / "config").read_bytes()
    assert config.endswith(b"# <<< ssh-gateway prod <<<\r\nHost mine\r\n    User me\r\n")
    assert b"\n" not in config.replace(b"\r\n", b"")


def test_a_symlinked_config_stays_a_symlink(tmp_path: Path) -> None:
    home = _home(tmp_path, None)
    dotfiles = tmp_path / "dotfiles" / "ssh_config"
    dotfiles.parent.mkdir()
    dotfiles.write_bytes(USER_CONFIG)
    os.symlink(dotfiles, home / ".ssh" / "config")
    _write(home, {"prod": PROD})
    assert (home / ".ssh" / "config").is_symlink()
    assert dotfiles.read_bytes().endswith(USER_CONFIG)


def test_a_host_of_two_stacks_is_refused(tmp_path: Path) -> None:
    home = _home(tmp_path)
    _write(home, {"dev": DEV})
    twin = StackSsh("Host ssh-gpu-alice\n    HostName elsewhere\n")
    with pytest.raises(SshConfigError, match="stack qa: Host ssh-gpu-alice is also a host of stack dev"):
        plan(home, {"qa": twin}, include=False)
    with pytest.raises(SshConfigError, match="stack qa: Host ssh-gpu-bob is also a host of stack dev"):
        plan(home, {"dev": DEV, "qa": StackSsh("Host ssh-gpu-bob\n")}, include=False)


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        (b"# >>> ssh-gateway dev >>>\nHost x\n", "the section of stack dev (line 1) has no end marker"),
        (b"Host x\n# <<< ssh-gateway dev <<<\n", "line 2 ends a section for stack dev that is not open"),
        (b"# >>> ssh-gateway dev >>>\n# >>> ssh-gateway qa >>>\n", "line 2 opens a section inside"),
    ],
)
def test_markers_edited_by_hand_are_refused_and_nothing_is_planned(
    tmp_path: Path, config: bytes, expected: str
) -> None:
    home = _home(tmp_path, config)
    with pytest.raises(SshConfigError) as refused:
        plan(home, {"dev": DEV}, include=False)
    assert expected in str(refused.value)
    assert (home / ".ssh" / "config").read_bytes() == config


def test_a_stack_name_must_be_a_plain_file_name(tmp_path: Path) -> None:
    with pytest.raises(SshConfigError, match="stack name 'org/proj/dev': use the short name"):
        plan(tmp_path, {"org/proj/dev": DEV}, include=False)


def test_the_programs_own_known_hosts_file_is_kept_and_made_absolute(tmp_path: Path) -> None:
    # What the program generates for an instance with a host identity (ssh_gateway.core.host_identity).
    identity = StackSsh(
        "Host ssh-gpu-a\n    HostName a.example.com\n    Port 40001\n    User root\n"
        "    UserKnownHostsFile ~/.ssh/known_hosts.d/ssh-gateway-dev\n    StrictHostKeyChecking yes\n",
        f"@cert-authority *.example.com {KEY}",
    )
    home = _home(tmp_path)
    _write(home, {"dev": identity})
    config = (home / ".ssh" / "config").read_text(errors="surrogateescape")
    managed = home / ".ssh" / "known_hosts.d" / "ssh-gateway-dev"
    assert f"    UserKnownHostsFile {managed}\n    StrictHostKeyChecking yes\n" in config
    assert config.count("UserKnownHostsFile") == 1
    assert managed.read_text().splitlines()[1:] == [f"@cert-authority *.example.com {KEY}"]
