"""The merged rule design (`ssh_gateway/core/firewall.py`): which ports each rule opens, to whom, at what priority."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ssh_gateway.core.firewall import (
    Cidrs,
    ServiceTag,
    Sources,
    merged_rules,
    plan_rules,
    port_ranges,
    priority_band,
)
from ssh_gateway.core.ports import PortRange

pytestmark = pytest.mark.unit

RANGE = PortRange(start=40000, end=40199)
DEFAULT = Cidrs(("203.0.113.0/24",))
OWN_SETS: list[Sources] = [
    DEFAULT,
    Cidrs(("198.51.100.7/32",)),
    Cidrs(("198.51.100.7/32", "198.51.100.8/32")),
    Cidrs(("198.51.100.8/32", "198.51.100.7/32")),  # the set above, listed the other way round
    ServiceTag("VirtualNetwork"),
]


def _expand(ranges: tuple[str, ...]) -> list[int]:
    ports: list[int] = []
    for entry in ranges:
        first, _, last = entry.partition("-")
        ports.extend(range(int(first), int(last or first) + 1))
    return ports


def _key(sources: Sources) -> frozenset[str]:
    return frozenset(sources.networks) if isinstance(sources, Cidrs) else frozenset({sources.tag})


Fleet = tuple[dict[str, int], dict[str, Sources]]


@st.composite
def fleets(draw: st.DrawFn) -> tuple[dict[str, int], dict[str, Sources]]:
    """A port table (distinct ports of the range) and each instance's sources."""
    names = draw(st.lists(st.from_regex(r"[a-z][a-z0-9]{0,6}", fullmatch=True), unique=True, max_size=40))
    ports = draw(st.lists(st.sampled_from(list(RANGE)), unique=True, min_size=len(names), max_size=len(names)))
    sources = {n: draw(st.sampled_from(OWN_SETS)) for n in names}
    return dict(zip(names, ports, strict=True)), sources


@given(fleets())
def test_every_port_is_allowed_from_exactly_its_instances_sources(fleet: Fleet) -> None:
    ports, sources = fleet
    rules = merged_rules(ports, sources, DEFAULT)
    allowed: dict[int, list[frozenset[str]]] = {}
    for rule in rules:
        for port in _expand(rule.port_ranges):
            allowed.setdefault(port, []).append(_key(rule.sources))
    assert allowed == {ports[name]: [_key(sources[name])] for name in ports}
    # one rule per distinct set, at the first distinct priorities from priorityBase
    assert len(rules) == len({_key(s) for s in sources.values()})
    assert sorted(r.priority for r in rules) == list(range(1000, 1000 + len(rules)))


@given(fleets(), st.data())
def test_a_removed_instance_leaves_no_port_open_and_others_keep_their_priority(
    fleet: Fleet, data: st.DataObject
) -> None:
    ports, sources = fleet
    gone = data.draw(st.sets(st.sampled_from(sorted(ports))) if ports else st.just(set[str]()))
    before = {r.key: r for r in merged_rules(ports, sources, DEFAULT)}
    held = {key: r.priority for key, r in before.items()}  # what the preview reads back from the NSG
    # The port table still lists the removed instances: the rules follow the instances, not the table.
    after = merged_rules(ports, {n: s for n, s in sources.items() if n not in gone}, DEFAULT, held=held)
    opened = {p for rule in after for p in _expand(rule.port_ranges)}
    assert not opened & {ports[n] for n in gone}
    assert all(before[r.key].priority == r.priority for r in after)


@given(st.sets(st.integers(min_value=1, max_value=2000), max_size=200))
def test_ranges_are_minimal_and_exact(ports: set[int]) -> None:
    ranges = port_ranges(ports)
    assert sorted(_expand(ranges)) == sorted(ports)
    runs = sum(1 for p in ports if p - 1 not in ports)  # each run of consecutive ports needs one entry
    assert len(ranges) == runs


def test_contiguous_ports_merge_into_ranges() -> None:
    assert port_ranges([40003, 40001, 40002, 40007, 40009, 40008, 40011]) == ("40001-40003", "40007-40009", "40011")
    assert port_ranges([]) == ()


@given(st.lists(st.sampled_from([f"198.51.100.{n}/32" for n in range(40)]), unique=True, max_size=31), st.data())
def test_a_set_keeps_its_priority_whatever_sets_come_and_go(cidrs: list[str], data: st.DataObject) -> None:
    sources: dict[str, Sources] = {"a": DEFAULT, **{f"i{n}": Cidrs((c,)) for n, c in enumerate(cidrs)}}
    before = {p.key: p.priority for p in plan_rules(sources, DEFAULT)}
    kept = data.draw(st.sets(st.sampled_from(sorted(sources))))
    extra = data.draw(st.lists(st.sampled_from([f"192.0.2.{n}/32" for n in range(40)]), unique=True, max_size=10))
    changed = {**{n: s for n, s in sources.items() if n in kept}, **{f"x{c}": Cidrs((c,)) for c in extra}}
    after = {p.key: p.priority for p in plan_rules(changed, DEFAULT, held=before)}
    assert all(after[k] == before[k] for k in after.keys() & before.keys())
    assert len(set(after.values())) == len(after)


def test_the_default_sources_take_priority_base() -> None:
    before = {p.key: p.priority for p in plan_rules({"a": DEFAULT, "b": OWN_SETS[1]}, DEFAULT)}
    assert before[""] == 1000  # the default set: priorityBase itself


def test_sets_that_outrun_azures_highest_priority_are_refused_with_the_fix() -> None:
    sources: dict[str, Sources] = {f"i{n}": Cidrs((f"198.51.100.{n}/32",)) for n in range(40)}
    assert len(plan_rules(sources, DEFAULT)) == 40  # no block of the stack's to outgrow
    with pytest.raises(
        ValueError,
        match=r"^no NSG priority is free for this stack's merged rule of sources 198\.51\.100\.\d+/32: "
        r"ssh-gateway:firewall.priorityBase=4095 leaves 4095-4096, and other rules of the NSG or of this stack hold "
        r"every one \(4095 by this stack's rule of sources 198\.51\.100\.\d/32, 4096 by .*\); lower "
        r"ssh-gateway:firewall.priorityBase",
    ):
        plan_rules({f"i{n}": Cidrs((f"198.51.100.{n}/32",)) for n in range(3)}, DEFAULT, priority_band(4095))


@given(fleets(), st.sets(st.integers(min_value=1000, max_value=1060), max_size=40))
def test_new_rules_avoid_the_priorities_other_rules_hold(fleet: Fleet, busy: set[int]) -> None:
    ports, sources = fleet
    rules = merged_rules(ports, sources, DEFAULT, busy=dict.fromkeys(busy, "other"))
    assert not {r.priority for r in rules} & busy
    assert len({r.priority for r in rules}) == len(rules)
    assert all(r.priority >= 1000 for r in rules)


@given(fleets(), st.data())
def test_a_held_priority_stays_while_other_rules_come_and_go(fleet: Fleet, data: st.DataObject) -> None:
    ports, sources = fleet
    before = {r.key: r.priority for r in merged_rules(ports, sources, DEFAULT)}
    # Other stacks' rules appear on every priority this stack's rules do not hold, or disappear.
    others = data.draw(st.sets(st.integers(min_value=1000, max_value=1100).filter(lambda p: p not in before.values())))
    after = {
        r.key: r.priority
        for r in merged_rules(ports, sources, DEFAULT, held=before, busy=dict.fromkeys(others, "other"))
    }
    assert after == before


def test_a_new_set_never_takes_the_priority_of_a_set_that_goes() -> None:
    # Set b's rule (1001) is deleted only at the end of the `up` that creates set c's: c takes 1002, not 1001.
    held = {r.key: r.priority for r in plan_rules({"a": DEFAULT, "b": OWN_SETS[1]}, DEFAULT)}
    assert sorted(held.values()) == [1000, 1001]
    [kept, new] = plan_rules({"a": DEFAULT, "c": OWN_SETS[4]}, DEFAULT, held=held)
    assert (kept.priority, new.priority) == (1000, 1002)


@st.composite
def slices(draw: st.DrawFn) -> tuple[int, PortRange, list[PortRange]]:
    """A priorityBase, a published range and disjoint slices of it (shards' `ports.range`), gaps allowed."""
    base = draw(st.integers(min_value=100, max_value=4096))
    start = draw(st.integers(min_value=1024, max_value=30000))
    cuts = sorted(draw(st.sets(st.integers(min_value=0, max_value=20000), min_size=2, max_size=80)))
    published = PortRange(start=start + cuts[0], end=start + cuts[-1])
    pieces = [PortRange(start=start + a, end=start + b - 1) for a, b in itertools.pairwise(cuts)]
    kept = [p for p in pieces if draw(st.booleans())] or pieces[:1]
    return base, published, kept


@given(slices())
def test_disjoint_slices_of_one_published_range_get_disjoint_bands(
    drawn: tuple[int, PortRange, list[PortRange]],
) -> None:
    base, published, shards = drawn
    bands = [priority_band(base, own, published) for own in shards]
    taken = [p for band in bands for p in band.priorities]
    assert len(taken) == len(set(taken)), "two shards share a priority"
    assert all(base <= p <= 4096 for p in taken)
    # Slices that fill the published range get every priority from the base, each exactly once.
    every = [p for own in _fill(published, shards) for p in priority_band(base, own, published).priorities]
    assert sorted(every) == list(range(base, 4097))


def _fill(published: PortRange, shards: list[PortRange]) -> list[PortRange]:
    """The slices and the gaps between them: the whole published range, cut where the slices are."""
    cuts = sorted({published.start, published.end + 1, *(s.start for s in shards), *(s.end + 1 for s in shards)})
    return [PortRange(start=a, end=b - 1) for a, b in itertools.pairwise(cuts)]


def test_a_stack_alone_in_its_published_range_takes_from_the_whole() -> None:
    whole = range(1000, 4097)
    assert priority_band(1000).priorities == whole
    assert priority_band(1000, RANGE, RANGE).priorities == whole
    assert priority_band(1000, RANGE, None).priorities == whole
    # 40100-40149 is the third quarter of 40000-40199: the third quarter of 1000-4096.
    quarter = priority_band(1000, PortRange(start=40100, end=40149), RANGE)
    assert quarter.priorities == range(1000 + 2 * 3097 // 4, 1000 + 3 * 3097 // 4)
