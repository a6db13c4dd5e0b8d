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
    assert view.busy("ssh-gateway", "prod-a") == {1033: "ssh-gateway.prod-b.ports"}


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


SLICE = 20


def _shard(k: int, shards: int = 40, size: int = SLICE) -> Settings:
    """Shard `k` of `shards`: its own slice of `size` ports of one published range, merged rules and a CONNECT
    rule, the default priorityBase; nothing else apart from its name."""
    first = 20000 + k * size
    published = f"20000-{20000 + shards * SLICE - 1}"
    shard: Settings = connect_settings(
        ports={"range": f"{first}-{first + size - 1}"},
        gateway={"hostTemplate": "ssh-{instance}.example.com", "publishedRange": published},
        firewall={k: v for k, v in FIREWALL.items() if k != "priorityBase"} | {"rules": "merged"},
    )
    return shard


def test_forty_shards_planned_against_one_read_of_the_nsg_take_forty_bands() -> None:
    # Every shard reads the NSG before any writes (their `up`s started together): each still plans priorities
    # no other shard plans, around a foreign rule at the first shard's band start.
    foreign = NsgRule("other-tool", 1000, "Inbound", "someone else's", addresses=1)
    view = NsgView("nsg", (foreign,))
    plans = [_plan(_shard(k), f"shard-{k:02d}", view) for k in range(40)]
    priorities = [r.priorities[0] for plan in plans for r in plan.planned()]
    assert len(priorities) == 80 and len(set(priorities)) == 80 and 1000 not in priorities
    assert all(plan.problem() is None for plan in plans)
    # Shard 3's band is the fourth fortieth of 1000-4096: 1000 + 3 * 3097 // 40 = 1232 on.
    assert (plans[3].merged[0].priority, plans[3].connect_priority) == (1232, 1233)


def test_rules_held_before_the_bands_keep_their_priorities() -> None:
    # Upgrading: the shards' rules were taken first free from 1000 (the design before bands). Each keeps its
    # priority, so no rule is updated or replaced by the upgrade.
    rules: list[NsgRule] = []
    for k in range(40):
        mark = stack_marked("x", "ssh-gateway", f"shard-{k:02d}")
        names = (merged_rule_name("ssh-gateway", f"shard-{k:02d}", ""), f"ssh-gateway.shard-{k:02d}.connect")
        rules += [NsgRule(n, 1000 + 2 * k + i, "Inbound", mark, addresses=1) for i, n in enumerate(names)]
    view = NsgView("nsg", tuple(rules))
    for k in range(40):
        planned = {(r.name, r.priorities[0]) for r in _plan(_shard(k), f"shard-{k:02d}", view).planned()}
        assert planned <= {(r.name, r.priority) for r in rules}


def test_a_full_band_is_refused_naming_it_and_the_rules_in_it() -> None:
    band = range(1232, 1309)  # shard 3's
    view = NsgView("nsg", tuple(NsgRule(f"other-{p}", p, "Inbound", "", addresses=1) for p in band))
    with pytest.raises(ValueError, match=r"^no NSG priority is free for this stack's merged rule") as caught:
        _plan(_shard(3), "shard-03", view)
    assert str(caught.value).endswith(
        ": this stack's band 1232-1308 (ssh-gateway:ports.range 20060-20079's share of "
        "ssh-gateway:gateway.publishedRange 20000-20799, in 1000-4096) is held by 1232 by 'other-1232', 1233 by "
        "'other-1233', 1234 by 'other-1234' and 74 more; remove those rules, widen ssh-gateway:ports.range (a wider "
        "share is a wider band) or lower ssh-gateway:firewall.priorityBase"
    )


def test_a_slice_too_small_for_a_priority_is_refused_with_the_fix() -> None:
    with pytest.raises(ValueError) as caught:
        _plan(_shard(0, shards=500, size=1), "shard-00", NsgView("nsg"))
    assert str(caught.value) == (
        "no NSG priority is free for this stack's merged rule of sources 203.0.113.0/24: ssh-gateway:ports.range "
        "20000-20000 is 1 of the 10,000 ports of ssh-gateway:gateway.publishedRange 20000-29999, too small a share to "
        "get one of the priorities 1000-4096; widen ssh-gateway:ports.range or lower ssh-gateway:firewall.priorityBase"
    )
