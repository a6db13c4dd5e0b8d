"""The firewall's rules under Pulumi mocks: the merged design's registrations and the NSG check at preview."""

from __future__ import annotations

from typing import Any

import pulumi
import pytest

from components.nsg_check import checked_plan
from components.program import build
from ssh_gateway.core.names import NSG_RULE_TYPE, PANGOLIN_TYPE, StackName, merged_rule_name, stack_marked
from ssh_gateway.core.nsg_fit import NsgView
from ssh_gateway.core.org import OrgView
from ssh_gateway.core.stack_plan import StackPlan
from tests.mocks import NSG_READ

from .conftest import RecordingMocks
from .test_program import run_program, settings

pytestmark = pytest.mark.unit

MERGED = {
    "resourceGroup": "rg-gw",
    "nsgName": "nsg-gw",
    "sourceCidrs": ["203.0.113.0/24"],
    "priorityBase": 1000,
    "rules": "merged",
}


def _rules(mocks: RecordingMocks) -> dict[str, dict[str, Any]]:
    return {r.inputs["securityRuleName"]: r.inputs for r in mocks.of_type(NSG_RULE_TYPE)}


def _rule(
    name: str, priority: int, *, description: str = "someone else's", prefixes: list[str] | None = None
) -> dict[str, Any]:
    return {
        "name": name,
        "priority": priority,
        "direction": "Inbound",
        "access": "Allow",
        "protocol": "Tcp",
        "description": description,
        "sourceAddressPrefixes": prefixes or [],
        "sourceAddressPrefix": None if prefixes else "10.9.0.0/16",
    }


def test_merged_rules_open_each_set_of_sources_ports_in_one_rule(mocks: RecordingMocks) -> None:
    out = run_program(settings(firewall=MERGED))
    rules = _rules(mocks)
    default = merged_rule_name("ssh-gateway", "unit", "")
    [own] = set(rules) - {default}
    assert own.startswith(f"{default}-")  # no rule per instance: one per set of sources
    assert out["allocations"] == {"gpu-01": 40001, "gpu-02": 40002, "vm-01": 40050}
    assert rules[default]["destinationPortRanges"] == ["40001", "40050"]
    assert rules[default]["sourceAddressPrefix"] == "203.0.113.0/24"
    assert rules[default]["priority"] == 1000  # priorityBase: the first free
    assert rules[own]["destinationPortRanges"] == ["40002"]
    assert rules[own]["sourceAddressPrefixes"] == ["198.51.100.7/32", "198.51.100.8/32"]
    assert rules[own]["priority"] == 1001
    assert rules[default]["description"].endswith("[stack ssh-gateway/unit]")
    assert all("destinationPortRange" not in r or r["destinationPortRange"] is None for r in rules.values())


def test_a_thousand_instances_with_the_stacks_sources_are_one_rule_of_one_range(mocks: RecordingMocks) -> None:
    instances = [{"name": f"gpu-{n:04d}", "target": "clusterIp"} for n in range(1000)]
    run_program(settings(ports={"range": "40000-40999"}, firewall=MERGED, instances=instances))
    [rule] = mocks.of_type(NSG_RULE_TYPE)
    assert rule.inputs["destinationPortRanges"] == ["40000-40999"]
    assert len(mocks.of_type(PANGOLIN_TYPE)) == 1000


def test_merged_rules_are_refused_when_the_sets_of_sources_outrun_azures_priorities() -> None:
    instances = [
        {"name": f"gpu-{n:02d}", "target": "clusterIp", "sourceCidrs": [f"198.51.100.{n}/32"]} for n in range(40)
    ]
    assert settings(firewall=MERGED, instances=instances) is not None  # 40 sets: no block to outgrow
    with pytest.raises(Exception, match=r"firewall.priorityBase: no NSG priority is free for this stack's merged rule"):
        settings(firewall={**MERGED, "priorityBase": 4090}, instances=instances)


# --- the NSG check at preview ------------------------------------------------------------------------------------


def run_build(plan: StackPlan) -> None:
    """`build` as `run` calls it, with the plan checked against the NSG as read."""

    @pulumi.runtime.test  # type: ignore[untyped-decorator]
    def program() -> None:
        build(plan)

    program()


def _check(raw_firewall: dict[str, Any], *, stack: str = "unit", **overrides: Any) -> StackPlan:
    stack_settings = settings(firewall=raw_firewall, **overrides)
    return checked_plan(stack_settings, org=OrgView(), name=StackName("ssh-gateway", stack))


def _nsg(plan: StackPlan) -> NsgView:
    """The NSG as the check read it."""
    assert plan.firewall is not None
    return plan.firewall.nsg


def test_the_check_reads_the_nsg_and_passes_a_stack_that_fits(mocks: RecordingMocks) -> None:
    mocks.nsg_rules = [_rule("other-tool", 200)]
    assert [r.name for r in _nsg(_check(MERGED)).rules] == ["other-tool"]
    [call] = [c for c in mocks.calls if c.token == NSG_READ]
    assert (call.args["resourceGroupName"], call.args["networkSecurityGroupName"]) == ("rg-gw", "nsg-gw")


def test_a_new_merged_rule_takes_a_priority_no_other_rule_holds(mocks: RecordingMocks) -> None:
    mocks.nsg_rules = [_rule("shard-b-rule", 1000), _rule("outbound", 1001) | {"direction": "Outbound"}]
    run_build(_check(MERGED))
    assert _rules(mocks)[merged_rule_name("ssh-gateway", "unit", "")]["priority"] == 1001  # 1000 is taken inbound


def test_merged_rules_are_refused_when_other_rules_hold_every_priority_from_the_base(mocks: RecordingMocks) -> None:
    mocks.nsg_rules = [_rule(f"other-{p}", p) for p in range(4091, 4097)]
    with pytest.raises(pulumi.RunError) as caught:
        _check({**MERGED, "priorityBase": 4090})
    assert str(caught.value) == (
        "ssh-gateway:firewall.priorityBase: no NSG priority is free for this stack's merged rule of sources "
        "198.51.100.7/32,198.51.100.8/32: ssh-gateway:firewall.priorityBase=4090 leaves 4090-4096, and other rules of "
        "the NSG or of this stack hold every one (4090 by this stack's rule of sources 203.0.113.0/24, 4091 by "
        "'other-4091', 4092 by 'other-4092' and 4 more); lower ssh-gateway:firewall.priorityBase (Azure allows down "
        "to 100) or remove rules from the NSG"
    )


def test_per_instance_rules_refuse_another_rule_anywhere_in_their_block(mocks: RecordingMocks) -> None:
    mocks.nsg_rules = [_rule("someone", 1042)]
    with pytest.raises(
        pulumi.RunError, match=r"instance rules take priorities 1000-1099, and 1042 is held by 'someone', a rule not"
    ):
        _check({**MERGED, "rules": "perInstance"})
    mocks.nsg_rules = [_rule("someone", 1042, description=stack_marked("x", "ssh-gateway", "unit"))]
    _check({**MERGED, "rules": "perInstance"})  # passes: the stack's own old rule, on its port


def test_a_full_nsg_is_refused_naming_the_count_and_the_limit(mocks: RecordingMocks) -> None:
    mocks.nsg_rules = [_rule(f"r{n}", 2000 + n) for n in range(998)]
    with pytest.raises(pulumi.RunError) as caught:
        _check({**MERGED, "rules": "perInstance"})
    assert str(caught.value) == (
        "NSG 'nsg-gw' would hold 1,001 rules, over Azure's 1,000 per NSG: 998 are not this stack's, 0 of its old "
        "ones stay until the new exist, and this stack adds 3; ssh-gateway:firewall.rules: merged opens them with "
        "one rule per set of sources"
    )
    _check(MERGED)  # passes: the same instances, merged, are 2 rules


def test_addresses_over_four_thousand_are_refused(mocks: RecordingMocks) -> None:
    wide = [f"10.{n // 250}.{n % 250}.0/24" for n in range(3999)]
    mocks.nsg_rules = [_rule("wide", 300, prefixes=wide)]
    with pytest.raises(pulumi.RunError, match=r"4,002 source addresses and ranges, over Azure's 4,000 per NSG: "):
        _check(MERGED)


def test_a_rule_name_over_eighty_characters_is_refused(mocks: RecordingMocks) -> None:
    stack = "s" * 70
    with pytest.raises(pulumi.RunError, match=r"rule name 'ssh-gateway\.s+\.ports' has 88 characters, over Azure's 80"):
        _check(MERGED, stack=stack)


def test_a_rule_name_taken_by_another_is_refused(mocks: RecordingMocks) -> None:
    mocks.nsg_rules = [_rule("ssh-gateway.unit.ports", 3000)]
    with pytest.raises(
        pulumi.RunError, match=r"'ssh-gateway\.unit\.ports' is taken by a rule that is not this stack's"
    ):
        _check(MERGED)


def test_an_nsg_that_cannot_be_read_refuses_the_stack(mocks: RecordingMocks) -> None:
    mocks.nsg_rules = None
    with pytest.raises(
        pulumi.RunError, match=r"^cannot read NSG 'nsg-gw' in resource group 'rg-gw' \(ssh-gateway:firewall\)"
    ):
        _check(MERGED)


def test_the_merged_rules_keep_the_priorities_the_nsg_holds(mocks: RecordingMocks) -> None:
    default = merged_rule_name("ssh-gateway", "unit", "")
    run_program(settings(firewall=MERGED))
    [own] = set(_rules(mocks)) - {default}
    assert _rules(mocks)[own]["priority"] != 1020
    mocks.registered.clear()
    mocks.nsg_rules = [_rule(own, 1020, description=stack_marked("x", "ssh-gateway", "unit"))]
    plan = _check(MERGED)
    assert _nsg(plan).held("ssh-gateway", "unit") == {own.rsplit("-", 1)[1]: 1020}

    run_build(plan)
    assert _rules(mocks)[own]["priority"] == 1020
