"""`core/nsg_fit.py` on its own: the peak an NSG must hold while a stack's old rules stay beside its new ones."""

from __future__ import annotations

import pytest

from ssh_gateway.core.names import StackName, merged_rule_name, nsg_rule_name, stack_marked
from ssh_gateway.core.nsg_fit import FirewallPlan, NsgRule, NsgView, PlannedRule, nsg_problem
from ssh_gateway.core.settings import Settings
from ssh_gateway.core.stack_plan import firewall_plan

from .test_program_connect import FIREWALL, connect_settings

pytestmark = pytest.mark.unit

MARK = stack_marked("ssh-gateway: public ssh", "ssh-gateway", "prod-a")


def _own(name: str, priority: int) -> NsgRule:
    return NsgRule(name=name, priority=priority, direction="Inbound", description=MARK, addresses=1)


def _merged(priority: int = 3000) -> PlannedRule:
    return PlannedRule(merged_rule_name("ssh-gateway", "prod-a", ""), (priority, priority), 1)


def test_old_per_instance_rules_count_until_the_merged_rule_exists() -> None:
    # Moving 999 instances from per-instance rules to one merged rule: 999 old + 1 new at the peak.
    old = tuple(_own(nsg_rule_name(f"i{n}"), 1000 + n) for n in range(999))
    assert nsg_problem(NsgView("nsg", old), [_merged()], project="ssh-gateway", stack="prod-a") is None
    one_more = NsgView("nsg", (*old, _own(nsg_rule_name("i999"), 1999)))
    assert nsg_problem(one_more, [_merged()], project="ssh-gateway", stack="prod-a") == (
        "NSG 'nsg' would hold 1,001 rules, over Azure's 1,000 per NSG: 0 are not this stack's, 1,000 of its old ones "
        "stay until the new exist, and this stack adds 1"
    )


def test_an_old_rule_of_the_stack_on_a_fixed_priority_is_in_the_way() -> None:
    view = NsgView("nsg", (_own(nsg_rule_name("gpu-01"), 3000),))
    assert nsg_problem(view, [_merged(3000)], project="ssh-gateway", stack="prod-a") == (
        "NSG 'nsg': this stack's rule 'ssh-gateway.prod-a.ports' needs priority 3000, held by 'ssh-gateway-gpu-01', "
        "an old rule of this stack that stays until the new rules exist (Pulumi deletes after it creates), and Azure "
        "refuses two inbound rules at one priority"
    )


def test_an_old_merged_rule_of_the_stack_is_in_its_per_instance_blocks_way() -> None:
    # Moving back to `perInstance`: the merged rule at 1000 stays until the instances' rules exist.
    view = NsgView("nsg", (_own(merged_rule_name("ssh-gateway", "prod-a", ""), 1000), _own(nsg_rule_name("b"), 1001)))
    block = [PlannedRule(nsg_rule_name(n), (1000, 1099), 1) for n in ("a", "b")]
    problem = nsg_problem(view, block, project="ssh-gateway", stack="prod-a")
    assert problem is not None and "1000 is held by 'ssh-gateway.prod-a.ports', an old rule of this stack" in problem
    view = NsgView("nsg", (_own(nsg_rule_name("b"), 1001), _own(nsg_rule_name("gone"), 1002)))
    assert nsg_problem(view, block, project="ssh-gateway", stack="prod-a") is None  # instances' own ports


def test_another_stacks_rules_are_not_this_stacks() -> None:
    theirs = NsgRule(
        "ssh-gateway.prod-b.ports", 1033, "Inbound", stack_marked("x", "ssh-gateway", "prod-b"), addresses=1
    )
    view = NsgView("nsg", (theirs, _own("ssh-gateway.prod-a.ports", 1000)))
    assert view.held("ssh-gateway", "prod-a") == {"": 1000}
    assert view.busy("ssh-gateway", "prod-a") == {1033}


def _plan(settings: Settings, stack: str, view: NsgView) -> FirewallPlan:
    plan = firewall_plan(settings, stack=StackName("ssh-gateway", stack), nsg=view)
    assert plan is not None
    return plan


def test_forty_shards_with_the_default_priority_base_share_an_nsg_without_a_collision() -> None:
    # Each shard (a merged rule for its port-mode instance, a CONNECT rule) planned against the NSG as the shards
    # before it left it, as their `up`s one after the other would: no shard is configured apart from its name.
    shard = connect_settings(firewall={k: v for k, v in FIREWALL.items() if k != "priorityBase"} | {"rules": "merged"})
    rules: list[NsgRule] = []
    for k in range(40):
        stack = f"shard-{k:02d}"
        view = NsgView("nsg", tuple(rules))
        plan = _plan(shard, stack, view)
        assert plan.problem() is None
        planned = plan.planned()
        mark = stack_marked("x", "ssh-gateway", stack)
        rules += [NsgRule(r.name, r.priorities[0], "Inbound", mark, r.addresses) for r in planned]
    priorities = [r.priority for r in rules]
    assert len(rules) == 80 and sorted(priorities) == list(range(1000, 1080))
    # And again, each shard's next preview: every rule keeps its priority.
    view = NsgView("nsg", tuple(rules))
    for k in range(40):
        again = _plan(shard, f"shard-{k:02d}", view).planned()
        assert {(r.name, r.priorities[0]) for r in again} <= {(r.name, r.priority) for r in rules}
