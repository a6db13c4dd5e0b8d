"""The policy pack (policy/) through the real CLI: `pulumi preview --policy-pack policy`, which runs the Python
pack through our language host's RunPlugin and its Analyzer proxy (scripts/toolchain/langhost.py).

Each rule gets a stack that breaks it. The NSG rule needs azure-native resources and this toolchain has no
azure-native plugin: its stack runs against a stand-in provider (fake_azure.py); its edge cases are unit tests
(tests/unit/test_policy_rules.py).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pulumi.automation import OpType

from pangolin_emulator.harness import EmulatorHandle
from ssh_gateway.plumbing.toolchain import REPO

from .cli import pulumi
from .conftest import StackFactory, stack_config, static_instance
from .probe import make_probe

pytestmark = pytest.mark.integration

PACK = str(REPO / "policy")

LOAD_BALANCER = """
import pulumi_kubernetes as k8s


class SshInstance(pulumi.ComponentResource):
    # Stands in for a broken SshInstance: same type token, a LoadBalancer Service as its child.
    def __init__(self, name):
        super().__init__("ssh-gateway:index:SshInstance", name, None, None)
        render = k8s.Provider("render", render_yaml_to_directory=config.require("renderDir"))
        k8s.core.v1.Service(
            f"{name}-service",
            spec=k8s.core.v1.ServiceSpecArgs(type="LoadBalancer", ports=[k8s.core.v1.ServicePortArgs(port=22)]),
            opts=pulumi.ResourceOptions(parent=self, provider=render),
        )
        self.register_outputs({})


SshInstance("gpu-lb")
"""


def violations(stdout: str) -> list[tuple[str, str, str]]:
    """(policy, resource, message) for every `[mandatory]` entry of the CLI's Policies section."""
    found = re.findall(r"- \[mandatory\]\s+(\S+)\s+\(([^)]*)\)\n\s+.*\n\s+(.*)\n", stdout)
    return [(policy, resource.split(": ")[-1], message.strip()) for policy, resource, message in found]


def test_a_pangolin_port_outside_the_range_is_refused(tmp_path: Path) -> None:
    probe = make_probe(tmp_path, 'pangolin("inside", 40019)\npangolin("outside", 45000)\n')
    probe.configure({"ssh-gateway:ports": {"range": "40000-40019"}})  # read through the stack's config
    preview = probe.pulumi("preview", "--policy-pack", PACK)
    assert preview.returncode != 0
    assert violations(preview.stdout) == [
        (
            "pangolin-port-in-range",
            "outside",
            "Pangolin resource 'outside' has proxyPort 45000, outside the stack's range 40000-40019 "
            "(ssh-gateway:ports.range). Allowed: a port from 40000 to 40019; pin one with the instance's `port`, "
            "or widen the range.",
        )
    ], preview.stdout


def test_two_resources_on_one_port_are_refused(tmp_path: Path) -> None:
    probe = make_probe(tmp_path, 'pangolin("first", 40003)\npangolin("second", 40003)\npangolin("third", 40004)\n')
    probe.configure({"ssh-gateway:ports": {"range": "40000-40019"}})
    preview = probe.pulumi("preview", "--policy-pack", PACK)
    assert preview.returncode != 0
    assert sorted(violations(preview.stdout)) == [
        (
            "port-held-once",
            "first",
            "port 40003 is used by 'first' and also by second: each public port belongs to "
            "one instance. Allowed: distinct ports, as the allocator hands out (unpin one).",
        ),
        (
            "port-held-once",
            "second",
            "port 40003 is used by 'second' and also by first: each public port belongs to "
            "one instance. Allowed: distinct ports, as the allocator hands out (unpin one).",
        ),
    ], preview.stdout


def test_a_load_balancer_service_from_the_component_is_refused(tmp_path: Path) -> None:
    probe = make_probe(tmp_path, LOAD_BALANCER)
    probe.configure({"probe:renderDir": str(tmp_path / "rendered")})
    preview = probe.pulumi("preview", "--policy-pack", PACK)
    assert preview.returncode != 0
    assert violations(preview.stdout) == [
        (
            "no-load-balancer-service",
            "gpu-lb-service",
            "Service 'gpu-lb-service' of an SshInstance has type LoadBalancer, which gives sshd a public IP of its "
            "own, bypassing Pangolin and the NSG rule. Allowed: NodePort or ClusterIP.",
        )
    ], preview.stdout


def test_the_program_passes_the_pack(emulator: EmulatorHandle, make_stack: StackFactory) -> None:
    stack = make_stack(stack_config(emulator, [static_instance("a"), static_instance("b", port=40007)]))
    preview = stack.preview(policy_packs=[PACK])
    assert "Loading policy packs" in preview.stdout
    assert "ssh-gateway-guardrails@v0.1.0" in preview.stdout
    assert "[mandatory]" not in preview.stdout
    # stack, allocation, host CA, host-key root, 2 x (component + Pangolin resource), port check
    assert preview.change_summary.get(OpType.CREATE) == 9


def test_a_production_stack_open_to_the_world_is_refused(
    azure_native: str, emulator: EmulatorHandle, make_stack: StackFactory
) -> None:
    # The NSG rules go to the fake azure-native provider (tests/integration/fake_azure.py): the engine and the
    # policy pack see exactly the SecurityRule inputs the program registers.
    firewall = {"resourceGroup": "rg-gw", "nsgName": "nsg-gw", "sourceCidrs": ["0.0.0.0/0"], "rules": "perInstance"}
    instances = [static_instance("a"), static_instance("b", sourceCidrs=["203.0.113.7/32"])]
    stack = make_stack(stack_config(emulator, instances, firewall=firewall, production=True))
    preview = pulumi(
        "preview", "--policy-pack", PACK, "--stack", stack.name, env={"PULUMI_DEBUG_PROVIDERS": azure_native}
    )
    assert preview.returncode != 0
    assert violations(preview.stdout) == [
        (
            "nsg-not-open-to-world-in-production",
            "a-nsg-rule",
            "NSG rule 'ssh-gateway-a' allows inbound 40000 from '0.0.0.0/0', i.e. from anyone, in a production stack "
            "(ssh-gateway:production: true). Allowed: specific CIDRs such as 203.0.113.0/24 in "
            "ssh-gateway:firewall.sourceCidrs or the instance's sourceCidrs.",
        )
    ], preview.stdout

    # The same stack, not marked production, passes.
    stack = make_stack(stack_config(emulator, instances, firewall=firewall), name=stack.name)
    preview = pulumi(
        "preview", "--policy-pack", PACK, "--stack", stack.name, env={"PULUMI_DEBUG_PROVIDERS": azure_native}
    )
    assert preview.returncode == 0, preview.stdout + preview.stderr
    assert "[mandatory]" not in preview.stdout
