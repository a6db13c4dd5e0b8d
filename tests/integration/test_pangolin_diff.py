"""What `pulumi preview --diff` shows for `PangolinTcpResource`, in the real CLI: per-property changes, and
whether a change updates in place or replaces."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from pulumi.automation import OpType

from pangolin_emulator.harness import EmulatorHandle
from ssh_gateway.ops.preview.summary import summarize

from .conftest import StackFactory, stack_config, static_instance
from .probe import make_probe

pytestmark = pytest.mark.integration

# One Pangolin resource inside a component of SshInstance's type, with its protocol from the config.
PROTOCOL_PROBE = """
class SshInstance(pulumi.ComponentResource):
    def __init__(self, name):
        super().__init__("ssh-gateway:index:SshInstance", name, None, None)
        protocol = config.get("protocol") or "tcp"
        pangolin(f"{name}-pangolin", 40005, protocol=protocol, opts=pulumi.ResourceOptions(parent=self))
        self.register_outputs({})


SshInstance("ssh")
"""


def _block(stdout: str, resource: str) -> str:
    """The lines `--diff` prints for one resource (up to the next resource or the outputs)."""
    start = stdout.index(f"::{resource}]")
    end = min(i for i in (stdout.find("pulumi-python:dynamic", start), stdout.find("--outputs:--", start)) if i > 0)
    return stdout[start : stdout.rfind("\n", start, end)]


def test_a_pinned_port_change_reads_as_a_replacement_for_the_proxy_port(
    emulator: EmulatorHandle, make_stack: StackFactory
) -> None:
    # A new port is a new claim, which only a create makes (the lowest id keeps a contested port).
    stack = make_stack(stack_config(emulator, [static_instance("a", port=40001)]))
    stack.up()
    stack = make_stack(stack_config(emulator, [static_instance("a", port=40002)]), name=stack.name)

    preview = stack.preview(diff=True)
    block = _block(preview.stdout, "a-pangolin")
    assert re.search(r"^\s*\+-pulumi-python:dynamic/pangolin:TcpResource: \(replace\)", preview.stdout, re.M)
    assert re.search(r"^\s*~ proxyPort\s*: 40001 => 40002$", block, re.M), block
    # Only the port changes: every other property is shown unchanged.
    assert len(re.findall(r"^\s*~ ", block, re.M)) == 1, block
    assert preview.change_summary.get(OpType.REPLACE) == 1


def test_a_protocol_change_says_replace(tmp_path: Path, emulator: EmulatorHandle) -> None:
    probe = make_probe(
        tmp_path,
        PROTOCOL_PROBE,
        {"probe:apiUrl": emulator.url},
        PANGOLIN_API_KEY=emulator.api_key,
    )
    try:
        up = probe.pulumi("up", "--yes", "--skip-preview")
        assert up.returncode == 0, up.stdout + up.stderr
        probe.configure({"probe:apiUrl": emulator.url, "probe:protocol": "udp"})

        preview = probe.pulumi("preview", "--diff")
        assert preview.returncode == 0, preview.stdout + preview.stderr
        assert re.search(r"^\s*\+-pulumi-python:dynamic/pangolin:TcpResource: \(replace\)", preview.stdout, re.M), (
            preview.stdout
        )
        assert re.search(r"^\s*~ protocol\s*: \"tcp\" => \"udp\"$", preview.stdout, re.M), preview.stdout
        assert re.search(r"^\s*\+-1 to replace$", preview.stdout, re.M), preview.stdout

        # The summary says so too.
        as_json = probe.pulumi("preview", "--json")
        assert as_json.returncode == 0, as_json.stderr
        [row] = summarize(json.loads(as_json.stdout)).rows
        assert (row.instance, row.change, row.replaced, row.touched) == (
            "ssh",
            "touched",
            ("ssh-pangolin (protocol)",),
            (),
        )

        # And it works in one `up`: the old tcp resource goes first, a udp one takes the port.
        replaced = probe.pulumi("up", "--yes", "--skip-preview")
        assert replaced.returncode == 0, replaced.stdout + replaced.stderr
        live = [r for r in emulator.state()["resources"] if r["name"] == "probe/ssh-pangolin"]
        assert [(r["mode"], r["proxyPort"]) for r in live] == [("udp", 40005)], live
    finally:
        destroyed = probe.pulumi("destroy", "--yes", "--skip-preview")
        assert destroyed.returncode == 0, destroyed.stdout + destroyed.stderr
