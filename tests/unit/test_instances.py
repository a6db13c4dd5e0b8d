"""Editing `ssh-gateway:instances` in a stack file: comments and order survive, a refused edit changes nothing."""

from __future__ import annotations

import difflib

import pytest
import yaml

from ssh_gateway.ops.tools.instance_edits import InstanceError, add_instance, list_instances, remove_instance, validate
from ssh_gateway.plumbing.toolchain import REPO

pytestmark = pytest.mark.unit

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAi5LozFLqWuY6k4TyD1C+Oys0CW2N2WqpjyAxjMsw+d"
STACK = """\
# qa: a stack file as people write them, comments everywhere.
config:
  ssh-gateway:pangolin:
    url: http://127.0.0.1:39003/v1  # the emulator
    orgId: acme
    siteId: 1
  ssh-gateway:ports:
    range: 40000-40019
    reserved: [40000]
  ssh-gateway:gateway:
    hostTemplate: ssh-{instance}.qa.example.com
  ssh-gateway:kubernetes:
    nodeIp: 10.0.0.4
  ssh-gateway:instances:  # one entry per dev box
    # alice: the first box
    - name: gpu-alice   # pinned below
      target: static
      staticHost: 127.0.0.1
      staticPort: 2222
      port: 40001

    # bob: shared with carol
    - name: gpu-bob
      user: bob
      target: static
      staticHost: 127.0.0.1
      staticPort: 2222
      # bob's sshd listens on the default port
  # keep the firewall off: loopback only
  ssh-gateway:firewall:
    enabled: false
encryptionsalt: v1:abc
"""


def _diff(before: str, after: str) -> list[str]:
    """The changed lines only, `+`/`-` prefixed."""
    return [
        line
        for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]


def test_add_appends_the_entry_after_the_last_one_and_changes_no_other_line() -> None:
    after = add_instance(
        STACK,
        {"name": "gpu-dave", "user": "dave", "sourceCidrs": ["203.0.113.7/32"], "selector": {"app": "dave"}},
    )
    assert _diff(STACK, after) == [
        "+    - name: gpu-dave",
        "+      user: dave",
        "+      selector: {app: dave}",
        "+      sourceCidrs: [203.0.113.7/32]",
    ]
    lines = after.splitlines()
    # After bob's own trailing comment, before the comment that belongs to the next key.
    assert lines.index("      # bob's sshd listens on the default port") + 1 == lines.index("    - name: gpu-dave")
    assert lines.index("    - name: gpu-dave") + 4 == lines.index("  # keep the firewall off: loopback only")
    assert [entry["name"] for entry in list_instances(after)] == ["gpu-alice", "gpu-bob", "gpu-dave"]


def test_keys_are_written_in_the_readme_table_order_and_values_are_quoted_when_yaml_needs_it() -> None:
    after = add_instance(
        STACK,
        {"hostKey": KEY, "staticPort": 2223, "staticHost": "127.0.0.1", "target": "static", "name": "gpu-eve",
         "user": "true", "port": 40009},
    )  # fmt: skip
    assert _diff(STACK, after) == [
        "+    - name: gpu-eve",
        "+      user: 'true'",
        "+      target: static",
        "+      port: 40009",
        "+      staticHost: 127.0.0.1",
        "+      staticPort: 2223",
        f"+      hostKey: {KEY}",
    ]
    entry = yaml.safe_load(after)["config"]["ssh-gateway:instances"][-1]
    assert entry["hostKey"] == KEY and entry["user"] == "true"


def test_remove_takes_the_entry_with_its_own_comment_and_leaves_the_next_ones() -> None:
    after = remove_instance(STACK, "gpu-alice")
    assert _diff(STACK, after) == [
        "-    # alice: the first box",
        "-    - name: gpu-alice   # pinned below",
        "-      target: static",
        "-      staticHost: 127.0.0.1",
        "-      staticPort: 2222",
        "-      port: 40001",
        "-",
    ]
    assert "    # bob: shared with carol\n    - name: gpu-bob\n" in after


def test_removing_the_last_entry_keeps_the_comment_of_the_key_after_it() -> None:
    after = remove_instance(STACK, "gpu-bob")
    assert _diff(STACK, after) == [
        "-    # bob: shared with carol",
        "-    - name: gpu-bob",
        "-      user: bob",
        "-      target: static",
        "-      staticHost: 127.0.0.1",
        "-      staticPort: 2222",
        "-      # bob's sshd listens on the default port",
    ]
    assert "      port: 40001\n\n  # keep the firewall off: loopback only\n" in after


def test_removing_every_entry_leaves_an_empty_list_and_add_fills_it_again() -> None:
    empty = remove_instance(remove_instance(STACK, "gpu-alice"), "gpu-bob")
    assert "  ssh-gateway:instances: []  # one entry per dev box\n  # keep the firewall off" in empty
    assert list_instances(empty) == []
    again = add_instance(empty, {"name": "gpu-zoe", "target": "static", "staticHost": "10.0.0.9", "staticPort": 22})
    assert "  ssh-gateway:instances:  # one entry per dev box\n    - name: gpu-zoe\n      target: static\n" in again


def test_add_to_a_file_without_instances_puts_the_key_at_the_end_of_config() -> None:
    without = STACK[: STACK.index("  ssh-gateway:instances:")] + STACK[STACK.index("  # keep the firewall") :]
    after = add_instance(without, {"name": "gpu-amy", "target": "static", "staticHost": "127.0.0.1", "staticPort": 22})
    assert _diff(without, after) == [
        "+  ssh-gateway:instances:",
        "+    - name: gpu-amy",
        "+      target: static",
        "+      staticHost: 127.0.0.1",
        "+      staticPort: 22",
    ]
    assert after.endswith(
        "    enabled: false\n  ssh-gateway:instances:\n    - name: gpu-amy\n      target: static\n"
        "      staticHost: 127.0.0.1\n      staticPort: 22\nencryptionsalt: v1:abc\n"
    )


def test_pyyaml_style_lists_keep_their_indentation() -> None:
    # What open_stack (yaml.safe_dump) writes: the '-' at the column of the key.
    text = yaml.safe_dump(
        {"config": {**yaml.safe_load(STACK)["config"], "ssh-gateway:instances": [{"name": "a", "target": "static",
         "staticHost": "127.0.0.1", "staticPort": 2222}]}},
        sort_keys=False,
    )  # fmt: skip
    after = add_instance(text, {"name": "b", "target": "static", "staticHost": "127.0.0.1", "staticPort": 2222})
    assert "  ssh-gateway:instances:\n  - name: a\n" in after
    assert "    staticPort: 2222\n  - name: b\n    target: static\n" in after
    assert remove_instance(after, "b") == text


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        (
            {"name": "Bad_Name", "target": "static", "staticHost": "127.0.0.1", "staticPort": 22},
            "ssh-gateway:instances[2].name = \"Bad_Name\": 'Bad_Name' is not a DNS label",
        ),
        ({"name": "gpu-x", "target": "static"}, "ssh-gateway:instances[2].staticHost: required, but not set"),
        ({"name": "gpu-x", "nodePort": 29999}, "ssh-gateway:instances[2].nodePort = 29999"),
        (
            {"name": "gpu-x", "target": "static", "staticHost": "127.0.0.1", "staticPort": 22, "port": 70000},
            "ssh-gateway:instances[2].port = 70000",
        ),
        (
            {"name": "gpu-x", "target": "static", "staticHost": "127.0.0.1", "staticPort": 22, "sourceCidrs": ["x"]},
            "ssh-gateway:instances[2].sourceCidrs = [\"x\"]: 'x' is not a CIDR",
        ),
        ({"name": "gpu-alice"}, 'an instance named "gpu-alice" already exists'),
        ({"name": "gpu-x", "colour": "red"}, "unknown key(s) colour; allowed: name, routing, user, target"),
    ],
)
def test_a_refused_add_names_the_key_and_value(entry: dict[str, object], expected: str) -> None:
    with pytest.raises(InstanceError) as refused:
        add_instance(STACK, entry)
    assert expected in str(refused.value)


def test_removing_an_unknown_instance_names_the_ones_there_are() -> None:
    with pytest.raises(InstanceError, match=r'no instance named "gpu-nobody" \(instances: gpu-alice, gpu-bob\)'):
        remove_instance(STACK, "gpu-nobody")


def test_validation_sees_the_config_as_pulumi_passes_it() -> None:
    settings = validate(STACK)
    assert [i.name for i in settings.instances] == ["gpu-alice", "gpu-bob"]
    assert settings.pangolin.site_id == 1 and settings.ports.reserved == (40000,)
    with pytest.raises(InstanceError, match=r"ssh-gateway:ports.range = \"40019-40000\""):
        validate(STACK.replace("range: 40000-40019", "range: 40019-40000"))


@pytest.mark.parametrize("name", ["local", "dev", "prod"])
def test_the_shipped_stacks_round_trip(name: str) -> None:
    text = (REPO / "stacks" / f"Pulumi.{name}.yaml").read_text()
    entries = list_instances(text)
    first = entries[0]["name"]
    assert add_instance(remove_instance(text, first), entries[0]).count(f"name: {first}") == 1
    added = add_instance(text, {"name": "gpu-new", "target": "static", "staticHost": "127.0.0.1", "staticPort": 22})
    assert remove_instance(added, "gpu-new") == text
