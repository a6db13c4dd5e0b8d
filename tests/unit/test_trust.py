"""Which names ssh checks an instance's key under, and the known_hosts lines that cover them; the matching is
checked against OpenSSH's own (`ssh-keygen -F`, the one process this layer allows, as in test_host_identity)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from ssh_gateway.core import host_identity as hi
from ssh_gateway.core import trust

pytestmark = pytest.mark.unit

KEY = hi.openssh_public_key(bytes(32))


def test_a_template_with_the_instance_needs_no_alias() -> None:
    template = "ssh-{instance}.example.com"
    assert not trust.shares_host_name(template)
    assert trust.host_key_alias(template, "gpu-01") is None
    assert trust.principals(template, "gpu-01") == ("ssh-gpu-01", "ssh-gpu-01.example.com")
    assert trust.ca_patterns(template) == ("ssh-*.example.com", "[ssh-*.example.com]:*")


def test_a_shared_host_name_uses_the_ssh_alias() -> None:
    assert trust.shares_host_name("127.0.0.1")
    assert trust.host_key_alias("127.0.0.1", "gpu-01") == "ssh-gpu-01"
    assert trust.principals("127.0.0.1", "gpu-01") == ("127.0.0.1", "ssh-gpu-01")
    assert trust.ca_patterns("127.0.0.1") == ("127.0.0.1", "[127.0.0.1]:*", "ssh-*", "[ssh-*]:*")


def test_lines_and_lookups() -> None:
    assert trust.known_hosts_file("dev") == "~/.ssh/known_hosts.d/ssh-gateway-dev"
    assert trust.plain_line("ssh-a.example.com", f"{KEY} comment") == f"ssh-a.example.com,[ssh-a.example.com]:* {KEY}"
    assert trust.lookup_key("h", 22, None) == "h"
    assert trust.lookup_key("h", 2222, None) == "[h]:2222"
    assert trust.lookup_key("h", 2222, "ssh-a") == "ssh-a"


def test_parse_known_hosts_keeps_markers_and_skips_the_rest() -> None:
    text = f"# comment\n\n@cert-authority a,b {KEY} CA\n|1|salt|hash {KEY}\nc {KEY}\n@revoked d {KEY}\n"
    entries = trust.parse_known_hosts(text)
    assert [(e.marker, e.patterns) for e in entries] == [
        ("@cert-authority", ("a", "b")),
        ("", ("c",)),
        ("@revoked", ("d",)),
    ]
    assert all(e.key == KEY for e in entries)


LINES = [
    f"ssh-*.example.com,[ssh-*.example.com]:* {KEY}",
    f"127.0.0.1,[127.0.0.1]:*,ssh-*,[ssh-*]:*,!ssh-bad {KEY}",
    f"[gw.example.com]:40001 {KEY}",
    f"h?st {KEY}",
]
NAMES = [
    "ssh-gpu-01.example.com",
    "[ssh-gpu-01.example.com]:40001",
    "ssh-gpu-01.example.org",
    "[ssh-gpu-01.example.com]",
    "127.0.0.1",
    "[127.0.0.1]:20001",
    "ssh-gpu-01",
    "SSH-GPU-01",
    "ssh-bad",
    "[gw.example.com]:40001",
    "[gw.example.com]:40002",
    "gw.example.com",
    "host",
    "hoost",
]


def test_matching_agrees_with_openssh(tmp_path: Path) -> None:
    keygen = shutil.which("ssh-keygen")
    assert keygen is not None, "ssh-keygen is not installed: run scripts/system-packages"
    entries = trust.parse_known_hosts("\n".join(LINES))
    matched = 0
    for index, line in enumerate(LINES):
        file = tmp_path / f"known_hosts_{index}"
        file.write_text(line + "\n")
        for name in NAMES:
            found = subprocess.run([keygen, "-F", name, "-f", str(file)], capture_output=True, text=True, check=False)
            assert entries[index].matches(name) == (found.returncode == 0), (line, name, found.stdout)
            matched += found.returncode == 0
    assert matched == 11  # ssh-*, [..]:*, case, negation, ? and an exact port all seen on both sides
