"""The preview summary on real `pulumi preview --json` output of a local-style stack."""

from __future__ import annotations

import json

import pytest

from pangolin_emulator.harness import EmulatorHandle
from ssh_gateway.ops.preview.summary import render, summarize
from ssh_gateway.plumbing.toolchain import REPO

from .cli import pulumi, run
from .conftest import StackFactory, stack_config, static_instance

pytestmark = pytest.mark.integration


def test_summary_of_a_real_preview(emulator: EmulatorHandle, make_stack: StackFactory) -> None:
    stack = make_stack(stack_config(emulator, [static_instance(n) for n in "abc"], port_range="40000-40004"))
    stack.up()  # a 40000, b 40001, c 40002
    changed = [
        static_instance("a", port=40004),  # pinned elsewhere: port changed
        static_instance("c", staticPort=2223),  # target changed
        static_instance("d"),  # added on the last never-used port
        static_instance("e"),  # added on a freed port
    ]  # b removed
    make_stack(stack_config(emulator, changed, port_range="40000-40004"), name=stack.name)

    preview = pulumi("preview", "--json", "--stack", stack.name)
    assert preview.returncode == 0, preview.stderr
    summary = summarize(json.loads(preview.stdout))

    assert summary.stack == stack.name
    rows = {row.instance: row for row in summary.rows}
    assert {name: row.change for name, row in rows.items()} == {
        "a": "port changed",
        "b": "removed",
        "c": "target changed",
        "d": "added",
        "e": "added",
    }
    assert (rows["a"].old_port, rows["a"].new_port) == (40000, 40004)
    assert rows["a"].endpoint == "ssh -p 40004 root@ssh-a.example.test"
    assert rows["b"].endpoint == "ssh -p 40001 root@ssh-b.example.test"  # the endpoint that goes away
    assert rows["c"].target == "127.0.0.1:2222 → 127.0.0.1:2223"
    assert rows["d"].endpoint == "ssh -p 40003 root@ssh-d.example.test"
    assert all(row.firewall == () for row in summary.rows)  # firewall.enabled is false here
    e_port = rows["e"].new_port
    assert e_port in (40000, 40001)
    other = 40001 if e_port == 40000 else 40000

    markdown = render(summary)
    assert markdown.startswith(f"### ssh-gateway preview: `{stack.name}`\n")
    assert "Instances: 2 added, 1 port changed, 1 target changed, 1 removed." in markdown
    # A port change replaces the Pangolin resource (a move in place would keep an older id, issue 23).
    change = "port changed (40000 → 40004); replaces a-pangolin (proxyPort)"
    assert f"| `a` | {change} | `ssh -p 40004 root@ssh-a.example.test` | 127.0.0.1:2222 | — |" in markdown
    assert "| `b` | removed | ~~`ssh -p 40001 root@ssh-b.example.test`~~ |" in markdown
    # Warnings: 4 of the 5 ports allocated, the port nobody has now, and the one that changes hands.
    assert "- Port range 40000-40004 is 80% allocated (4 of 5 usable ports, 1 free)" in markdown
    holder = {40000: "a", 40001: "b"}
    assert f"- Ports freed: {other} (was `{holder[other]}`)." in markdown
    assert f"- Port {e_port} passes from `{holder[e_port]}` to `e`" in markdown

    # The script renders the same preview the same way.
    script = run([str(REPO / "scripts" / "preview-summary"), stack.name])
    assert script.returncode == 0, script.stderr
    assert script.stdout == markdown


def test_summary_of_a_preview_without_changes(emulator: EmulatorHandle, make_stack: StackFactory) -> None:
    stack = make_stack(stack_config(emulator, [static_instance("a")], port_range="20000-20019"))
    stack.up()
    preview = pulumi("preview", "--json", "--stack", stack.name)
    assert preview.returncode == 0, preview.stderr
    markdown = render(summarize(json.loads(preview.stdout)))
    assert "No instance gains, loses or changes a public port, target or NSG rule." in markdown
    assert "Warnings" not in markdown


def test_summary_names_the_nsg_rules_opened_and_closed(
    azure_native: str, emulator: EmulatorHandle, make_stack: StackFactory
) -> None:
    # The NSG rules go to the stand-in azure-native provider (fake_azure.py); the preview is the real CLI's.
    firewall = {
        "resourceGroup": "rg-gw",
        "nsgName": "nsg-gw",
        "sourceCidrs": ["203.0.113.0/24"],
        "rules": "perInstance",
    }
    before = [static_instance("a"), static_instance("b"), static_instance("d")]
    stack = make_stack(stack_config(emulator, before, firewall=firewall))
    stack.up()  # a 40000, b 40001, d 40002
    changed = [
        static_instance("a", port=40009),  # its rule moves with it
        static_instance("c", sourceCidrs=["Internet"]),  # added, open to anyone
        static_instance("d", sourceCidrs=["198.51.100.9/32"]),  # only its rule's sources change
    ]  # b removed
    make_stack(stack_config(emulator, changed, firewall=firewall), name=stack.name)

    preview = pulumi("preview", "--json", "--stack", stack.name, env={"PULUMI_DEBUG_PROVIDERS": azure_native})
    assert preview.returncode == 0, preview.stderr
    summary = summarize(json.loads(preview.stdout))

    rows = {row.instance: row for row in summary.rows}
    assert {name: (row.change, row.firewall) for name, row in rows.items()} == {
        "a": ("port changed", ("closes 40000", "opens 40009 to 203.0.113.0/24")),
        "b": ("removed", ("closes 40001",)),
        "c": ("added", ("opens 40003 to Internet",)),
        "d": ("touched", ("40002: sources 203.0.113.0/24 → 198.51.100.9/32",)),
    }
    assert rows["d"].touched == ("d-nsg-rule: sourceAddressPrefix",)
    assert rows["d"].endpoint == "ssh -p 40002 root@ssh-d.example.test"
    markdown = render(summary)
    assert "| closes 40000; opens 40009 to 203.0.113.0/24 |" in markdown
    assert "| `d` | touched: d-nsg-rule: sourceAddressPrefix | `ssh -p 40002 root@ssh-d.example.test` |" in markdown
    assert "- `c`: the NSG rule opens 40003 to Internet, i.e. to anyone." in markdown


def test_summary_names_each_instances_port_in_the_merged_rules(
    azure_native: str, emulator: EmulatorHandle, make_stack: StackFactory
) -> None:
    # firewall.rules: merged: one rule per set of sources, yet each row still says which port opens to whom.
    firewall = {"resourceGroup": "rg-gw", "nsgName": "nsg-gw", "sourceCidrs": ["203.0.113.0/24"], "rules": "merged"}
    before = [static_instance("a"), static_instance("b"), static_instance("d"), static_instance("f")]
    stack = make_stack(stack_config(emulator, before, firewall=firewall))
    stack.up()  # a 40000, b 40001, d 40002, f 40003
    changed = [
        static_instance("a", port=40009),  # moves: the stack's rule closes 40000 and opens 40009
        static_instance("c", sourceCidrs=["Internet"]),  # added, in a rule of its own sources
        static_instance("d", sourceCidrs=["198.51.100.9/32"]),  # its port passes to its new sources' rule
        static_instance("f"),  # untouched: no row
    ]  # b removed
    make_stack(stack_config(emulator, changed, firewall=firewall), name=stack.name)

    preview = pulumi("preview", "--json", "--stack", stack.name, env={"PULUMI_DEBUG_PROVIDERS": azure_native})
    assert preview.returncode == 0, preview.stderr
    summary = summarize(json.loads(preview.stdout))

    rows = {row.instance: row for row in summary.rows}
    assert {name: (row.change, row.firewall) for name, row in rows.items()} == {
        "a": ("port changed", ("closes 40000", "opens 40009 to 203.0.113.0/24")),
        "b": ("removed", ("closes 40001",)),
        "c": ("added", ("opens 40004 to Internet",)),
        "d": ("touched", ("40002: sources 203.0.113.0/24 → 198.51.100.9/32",)),
    }
    assert "- `c`: the NSG rule opens 40004 to Internet, i.e. to anyone." in render(summary)
