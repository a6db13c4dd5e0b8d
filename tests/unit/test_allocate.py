"""Unit tests for the pure port allocator: one example per rule and message, then properties.

The properties run `allocate` run after run from a hypothesis state machine, threading each
returned state into the next run's `previous`, the way the provider's `check` does with stack state.
"""

from __future__ import annotations

import pickle
import random
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from ssh_gateway.core.allocation import AllocationError, AllocationState, allocate
from ssh_gateway.core.firewall import check_priorities, nsg_priority
from ssh_gateway.core.ports import PortRange

pytestmark = pytest.mark.unit

R = PortRange(start=40000, end=40099)


def state(ports: Mapping[str, int], released: tuple[int, ...] = ()) -> AllocationState:
    return AllocationState(ports=dict(ports), released=released)


def problems_of(**kwargs: Any) -> list[str]:
    with pytest.raises(AllocationError) as info:
        allocate(**kwargs)
    return info.value.problems


# --- PortRange -------------------------------------------------------------------------------------


def test_port_range_str_contains_size() -> None:
    assert str(R) == "40000-40099"
    assert R.size == 100
    assert 40000 in R and 40099 in R
    assert 39999 not in R and 40100 not in R and "40000" not in R
    assert PortRange(start=22, end=22).size == 1


@pytest.mark.parametrize(("start", "end"), [(0, 10), (10, 9), (1, 65536), (-5, 5), (True, 10), (1.0, 10)])
def test_port_range_rejects_invalid_bounds(start: Any, end: Any) -> None:
    with pytest.raises(ValueError, match=rf"{start!r}-{end!r} is not a port range"):
        PortRange(start=start, end=end)


def test_port_range_is_frozen_and_keyword_only() -> None:
    with pytest.raises(TypeError):
        PortRange(40000, 40099)  # type: ignore[call-arg]
    with pytest.raises(AttributeError):
        R.start = 1  # type: ignore[misc]


# --- allocation rules ----------------------------------------------------------------------------


def test_fresh_instances_get_the_lowest_ports_in_name_order() -> None:
    result = allocate(instances=["gpu-03", "gpu-01", "gpu-02"], port_range=R)
    assert result == state({"gpu-01": 40000, "gpu-02": 40001, "gpu-03": 40002})
    assert list(result.ports) == ["gpu-01", "gpu-02", "gpu-03"]


def test_defaults_are_not_shared_mutable_state() -> None:
    first = allocate(instances=["a"], port_range=R)
    assert isinstance(first.ports, dict)
    first.ports["b"] = 40001  # a caller mutating its own result...
    assert allocate(instances=["c"], port_range=R).ports == {"c": 40000}  # ...changes no default


def test_instances_keep_their_ports_whatever_is_added_or_removed() -> None:
    previous = allocate(instances=["gpu-02", "gpu-04"], port_range=R)
    result = allocate(instances=["gpu-01", "gpu-04", "gpu-05"], port_range=R, previous=previous)
    # gpu-01 sorts first but must not take gpu-02's freed port 40000 while never-used ones remain.
    assert result.ports == {"gpu-01": 40002, "gpu-04": 40001, "gpu-05": 40003}
    assert result.released == (40000,)


def test_removed_ports_are_released_in_name_order_and_dropped_from_earlier_positions() -> None:
    previous = state({"a": 40000, "b": 40001, "c": 40002}, released=(40001, 40005, 40009))
    result = allocate(instances=[], port_range=R, previous=previous)
    # 40001 was released before, then held again (corrupt-looking but possible via pins): it moves
    # to the end, as the most recently released.
    assert result.released == (40005, 40009, 40000, 40001, 40002)
    assert result.ports == {}


def test_released_ports_are_reused_only_after_never_used_ones_least_recently_released_first() -> None:
    small = PortRange(start=40000, end=40004)
    previous = state({"d": 40003, "e": 40004}, released=(40002, 40000, 40001))
    result = allocate(instances=["d", "e", "x", "y"], port_range=small, previous=previous)
    assert result.ports == {"d": 40003, "e": 40004, "x": 40002, "y": 40000}
    assert result.released == (40001,)


def test_a_never_used_port_beats_every_released_one() -> None:
    small = PortRange(start=40000, end=40004)
    previous = state({"a": 40000, "b": 40001, "c": 40002}, released=(40003,))
    result = allocate(instances=["a", "b", "c", "z"], port_range=small, previous=previous)
    assert result.ports["z"] == 40004
    assert result.released == (40003,)


def test_a_port_released_in_this_run_is_reused_when_nothing_else_is_free() -> None:
    small = PortRange(start=40000, end=40001)
    previous = state({"a": 40000, "b": 40001})
    result = allocate(instances=["b", "c"], port_range=small, previous=previous)
    assert result == state({"b": 40001, "c": 40000})


def test_released_ports_that_are_reserved_or_foreign_are_kept_but_skipped() -> None:
    small = PortRange(start=40000, end=40003)
    previous = state({"a": 40000}, released=(40001, 40002, 40003))
    result = allocate(
        instances=["a", "b"],
        port_range=small,
        reserved=[40001],
        foreign={40002: "Pangolin resource 7 'web'"},
        previous=previous,
    )
    assert result == state({"a": 40000, "b": 40003}, released=(40001, 40002))


def test_released_keeps_only_ports_inside_the_range() -> None:
    previous = state({"a": 40000}, released=(39000, 40050, 40200))
    result = allocate(instances=["a"], port_range=R, previous=previous)
    assert result.released == (40050,)


def test_new_pinned_instance_takes_its_pin_even_a_released_one() -> None:
    previous = state({"a": 40000}, released=(40007,))
    result = allocate(instances=["a", "b"], port_range=R, pins={"b": 40007}, previous=previous)
    assert result == state({"a": 40000, "b": 40007})


def test_a_pin_moves_a_kept_instance_and_releases_its_old_port() -> None:
    previous = state({"a": 40000, "b": 40001})
    result = allocate(instances=["a", "b"], port_range=R, pins={"a": 40050}, previous=previous)
    assert result == state({"a": 40050, "b": 40001}, released=(40000,))
    # Unpinning later does not move it back: it keeps the port it holds.
    assert allocate(instances=["a", "b"], port_range=R, previous=result) == result


def test_two_pinned_instances_can_swap_ports() -> None:
    previous = state({"a": 40000, "b": 40001})
    result = allocate(instances=["a", "b"], port_range=R, pins={"a": 40001, "b": 40000}, previous=previous)
    assert result == state({"a": 40001, "b": 40000})


def test_a_pin_may_take_the_port_of_a_removed_instance() -> None:
    previous = state({"a": 40000})
    result = allocate(instances=["b"], port_range=R, pins={"b": 40000}, previous=previous)
    assert result == state({"b": 40000})


def test_reserved_and_foreign_ports_are_never_handed_out() -> None:
    small = PortRange(start=40000, end=40004)
    result = allocate(
        instances=["a", "b"],
        port_range=small,
        reserved=[40000, 40002, 50000],
        foreign={40001: "Pangolin resource 3 'x'", 41000: "Pangolin resource 4 'y'"},
    )
    assert result == state({"a": 40003, "b": 40004})


# --- problems and their messages -----------------------------------------------------------------


def test_pin_outside_the_range() -> None:
    assert problems_of(instances=["gpu-01"], port_range=R, pins={"gpu-01": 5000}) == [
        "ssh-gateway:instances[gpu-01].port = 5000 is outside ssh-gateway:ports.range 40000-40099; "
        "pin a port inside it or widen the range"
    ]


def test_pin_that_is_not_a_port() -> None:
    assert problems_of(instances=["a", "b"], port_range=R, pins={"a": True, "b": "40001"}) == [
        "ssh-gateway:instances[a].port = True is not a port number (1-65535)",
        "ssh-gateway:instances[b].port = '40001' is not a port number (1-65535)",
    ]


def test_pin_for_an_instance_that_is_not_listed() -> None:
    assert problems_of(instances=["a"], port_range=R, pins={"gpu-09": 40001}) == [
        "ssh-gateway:instances[gpu-09].port = 40001 pins an instance that is not in ssh-gateway:instances; "
        "remove the pin or add the instance"
    ]


def test_two_instances_pinned_to_the_same_port() -> None:
    assert problems_of(instances=["a", "b", "c"], port_range=R, pins={"c": 40005, "a": 40005}) == [
        "instances 'a' and 'c' are pinned to the same port 40005; pin all but one of them elsewhere"
    ]


def test_pin_on_a_reserved_port() -> None:
    assert problems_of(instances=["a"], port_range=R, pins={"a": 40003}, reserved=[40003]) == [
        "ssh-gateway:instances[a].port = 40003 is in ssh-gateway:ports.reserved; pin another port or unreserve it"
    ]


def test_pin_on_a_foreign_port_names_the_resource() -> None:
    problems = problems_of(
        instances=["a"], port_range=R, pins={"a": 40003}, foreign={40003: "Pangolin resource 12 'db-proxy'"}
    )
    assert problems == [
        "ssh-gateway:instances[a].port = 40003 is bound by Pangolin resource 12 'db-proxy', which this stack does "
        "not own; pin another port or free it in Pangolin"
    ]


def test_pin_on_a_port_held_by_a_kept_instance_names_both() -> None:
    previous = state({"gpu-02": 40005})
    problems = problems_of(instances=["gpu-01", "gpu-02"], port_range=R, pins={"gpu-01": 40005}, previous=previous)
    assert problems == [
        "pin 40005 for instance 'gpu-01' is held by instance 'gpu-02'; "
        "pin 'gpu-01' to another port or move 'gpu-02' with a pin"
    ]


def test_reserved_port_allocated_to_an_instance() -> None:
    previous = state({"gpu-01": 40000, "gpu-02": 40003})
    problems = problems_of(instances=["gpu-01", "gpu-02"], port_range=R, reserved=[40003], previous=previous)
    assert problems == [
        "ssh-gateway:ports.reserved has 40003, which instance 'gpu-02' holds; "
        "unreserve it or move the instance with ssh-gateway:instances[gpu-02].port"
    ]
    # The suggested fix works: pin the instance elsewhere.
    moved = allocate(
        instances=["gpu-01", "gpu-02"], port_range=R, reserved=[40003], pins={"gpu-02": 40010}, previous=previous
    )
    assert moved == state({"gpu-01": 40000, "gpu-02": 40010}, released=(40003,))


def test_reserving_the_port_of_a_removed_instance_is_fine() -> None:
    result = allocate(instances=[], port_range=R, reserved=[40003], previous=state({"gone": 40003}))
    assert result == state({}, released=(40003,))


def test_kept_allocation_outside_a_shrunk_range() -> None:
    previous = state({"gpu-01": 40000, "gpu-02": 40150})
    assert problems_of(instances=["gpu-01", "gpu-02"], port_range=R, previous=previous) == [
        "instance 'gpu-02' holds port 40150, outside ssh-gateway:ports.range 40000-40099; "
        "widen the range back or set ssh-gateway:instances[gpu-02].port to a port inside it"
    ]
    # Removing the instance instead is fine, and its port leaves `released` with the range.
    assert allocate(instances=["gpu-01"], port_range=R, previous=previous) == state({"gpu-01": 40000})


def test_kept_allocation_bound_by_a_foreign_resource_names_it() -> None:
    previous = state({"gpu-01": 40004})
    problems = problems_of(
        instances=["gpu-01"], port_range=R, foreign={40004: "Pangolin resource 12 'db-proxy'"}, previous=previous
    )
    assert problems == [
        "instance 'gpu-01' holds port 40004, which is also bound by Pangolin resource 12 'db-proxy' outside "
        "this stack; free the port in Pangolin or move the instance with ssh-gateway:instances[gpu-01].port"
    ]


def test_exhaustion_names_the_range_the_instance_and_the_counts() -> None:
    small = PortRange(start=40000, end=40009)
    instances = [f"gpu-{i:02d}" for i in range(1, 7)]
    problems = problems_of(
        instances=instances,
        port_range=small,
        reserved=[40000, 40001, 40002, 39000],
        foreign={40003: "r3", 40004: "r4", 40000: "r0", 45000: "r9"},
        previous=state({"gpu-01": 40005, "gpu-02": 40006, "gpu-03": 40007, "gpu-04": 40008}),
    )
    assert problems == [
        "ssh-gateway:ports.range 40000-40009 is exhausted: no free port for instance 'gpu-06' "
        "(10 ports, 3 reserved, 2 bound by other Pangolin resources); "
        "widen the range or remove instances"
    ]


def test_exhaustion_of_many_instances_is_one_problem() -> None:
    problems = problems_of(instances=[f"n{i}" for i in range(7)], port_range=PortRange(start=22, end=23))
    assert problems == [
        "ssh-gateway:ports.range 22-23 is exhausted: no free port for instances 'n2', 'n3', 'n4' and 2 more "
        "(2 ports, 0 reserved, 0 bound by other Pangolin resources); "
        "widen the range or remove instances"
    ]


def test_duplicate_instance_names_and_invalid_reserved_ports() -> None:
    assert problems_of(instances=["a", "b", "a"], port_range=R, reserved=[0, 40001, 70000]) == [
        "instance 'a' is listed 2 times; instance names must be unique",
        "reserved port 0 is not a port number; ssh-gateway:ports.reserved takes integers 1-65535",
        "reserved port 70000 is not a port number; ssh-gateway:ports.reserved takes integers 1-65535",
    ]


def test_non_integer_port_in_state_is_reported() -> None:
    # The engine hands numbers back as floats: the caller must convert them, and is told if it did not.
    problems = problems_of(instances=["a"], port_range=R, previous=state({"a": 40000.0}))  # type: ignore[dict-item]
    assert problems == [
        "the stack state holds 40000.0 as the port of instance 'a', which is not a port number; "
        "the state was not written by this allocator"
    ]


def test_every_problem_is_reported_at_once() -> None:
    previous = state({"k1": 40150, "k2": 40003})
    with pytest.raises(AllocationError) as info:
        allocate(
            instances=["k1", "k2", "p1"],
            port_range=R,
            pins={"p1": 5000},
            reserved=[40003],
            previous=previous,
        )
    error = info.value
    assert isinstance(error, ValueError)
    assert len(error.problems) == 3
    assert str(error) == "\n".join(error.problems)
    assert [p.split()[0:2] for p in error.problems] == [
        ["ssh-gateway:instances[p1].port", "="],
        ["instance", "'k1'"],
        ["ssh-gateway:ports.reserved", "has"],
    ]


def test_allocation_error_pickles_with_its_problems() -> None:
    error = AllocationError(["one", "two"])
    copy = pickle.loads(pickle.dumps(error))  # noqa: S301  # our own bytes
    assert copy.problems == ["one", "two"]
    assert str(copy) == "one\ntwo"


# --- NSG priorities ------------------------------------------------------------------------------


def test_nsg_priority_is_base_plus_offset_and_a_bijection() -> None:
    assert nsg_priority(40000, R) == 1000
    assert nsg_priority(40099, R, base=200) == 299
    priorities = [nsg_priority(port, R) for port in range(R.start, R.end + 1)]
    assert len(set(priorities)) == R.size


def test_nsg_priority_outside_azure_limits() -> None:
    wide = PortRange(start=40000, end=45000)
    with pytest.raises(ValueError) as info:
        nsg_priority(43200, wide)
    assert str(info.value) == (
        "priority 4200 for port 43200 is outside Azure's 100-4096; "
        "lower ssh-gateway:firewall.priorityBase or narrow the range"
    )
    with pytest.raises(ValueError, match=r"^priority 50 for port 40000 .*; raise ssh-gateway:firewall.priorityBase"):
        nsg_priority(40000, R, base=50)
    with pytest.raises(ValueError, match="port 39999 is outside the range 40000-40099"):
        nsg_priority(39999, R)


def test_check_priorities_validates_the_whole_range() -> None:
    check_priorities(R, 1000)
    check_priorities(R, 3997)  # 3997 + 99 = 4096
    check_priorities(PortRange(start=1, end=3997), 100)
    with pytest.raises(ValueError, match=r"^priorities 3998-4097 for ports 40000-40099 .*at most 3997"):
        check_priorities(R, 3998)
    with pytest.raises(ValueError, match=r"priorities 99-198 .*raise ssh-gateway:firewall.priorityBase"):
        check_priorities(R, 99)
    with pytest.raises(ValueError, match=r"narrow ssh-gateway:ports.range to at most 3997 ports"):
        check_priorities(PortRange(start=20000, end=39999), 100)


# --- performance guard ---------------------------------------------------------------------------


class _Name(str):
    """An instance name that counts every comparison and hash the allocator makes on it."""

    __slots__ = ()
    ops = 0

    def __hash__(self) -> int:
        _Name.ops += 1
        return str.__hash__(self)

    def __eq__(self, other: object) -> bool:
        _Name.ops += 1
        return str.__eq__(self, other)

    def __lt__(self, other: str) -> bool:
        _Name.ops += 1
        return str.__lt__(self, other)


def _work(count: int) -> int:
    """The steps `allocate` takes for `count` fresh instances: the Python calls it makes (generator steps and
    comprehensions included) plus the comparisons and hashes of instance names, counted, not timed."""
    names = [_Name(f"gpu-{i:05d}") for i in range(count)]
    random.Random(0).shuffle(names)  # noqa: S311  # test input order, not secrets
    calls = 0

    def profile(_frame: object, event: str, _arg: object) -> None:
        nonlocal calls
        calls += event in ("call", "c_call")

    _Name.ops = 0
    sys.setprofile(profile)
    try:
        result = allocate(instances=names, port_range=PortRange(start=20000, end=39999))
    finally:
        sys.setprofile(None)
    assert len(set(result.ports.values())) == count
    return calls + _Name.ops


def test_fresh_instances_cost_n_log_n_not_n_squared() -> None:
    """10x the instances costs about 10x the steps (13x for the sort's n log n), where a quadratic step would
    cost 100x. Wall time lives in benchmarks/scale.py (`allocator_ms`), as a number, not a test."""
    small, large = _work(1_000), _work(10_000)
    assert large / small < 20, f"1k instances: {small} steps, 10k: {large} ({large / small:.1f}x)"


# --- properties ------------------------------------------------------------------------------------

NAMES = [f"gpu-{i:02d}" for i in range(12)]
# A little wider than the ranges the machine uses, so pins, reservations and shrinks fall outside too.
PORTS = st.integers(min_value=39_996, max_value=40_016)


@dataclass(frozen=True, kw_only=True)
class Config:
    """What the user (and the Pangolin org) hand the allocator on one run."""

    instances: frozenset[str] = frozenset()
    pins: Mapping[str, int] = field(default_factory=dict)
    reserved: frozenset[int] = frozenset()
    foreign: frozenset[int] = frozenset()
    start: int = 40000
    end: int = 40007

    @property
    def port_range(self) -> PortRange:
        return PortRange(start=self.start, end=self.end)

    def kwargs(self, previous: AllocationState, *, shuffle: random.Random | None = None) -> dict[str, Any]:
        """`allocate`'s arguments, each collection in sorted order or shuffled by `shuffle`."""

        def order(items: Any) -> list[Any]:
            listed = sorted(items)
            if shuffle is not None:
                shuffle.shuffle(listed)
            return listed

        return {
            "instances": order(self.instances),
            "port_range": self.port_range,
            "pins": {name: self.pins[name] for name in order(self.pins)},
            "reserved": order(self.reserved),
            "foreign": {port: f"Pangolin resource {port} 'other-{port}'" for port in order(self.foreign)},
            "previous": AllocationState(
                ports={name: previous.ports[name] for name in order(previous.ports)}, released=previous.released
            ),
        }


def dedupe_keep_last(ports: list[int]) -> list[int]:
    last = {port: index for index, port in enumerate(ports)}
    return [port for index, port in enumerate(ports) if last[port] == index]


# Each problem `allocate` may report, as a category the model below can predict.
CATEGORIES = {
    "pin-range": re.compile(r"^ssh-gateway:instances\[[^]]+\]\.port = \d+ is outside ssh-gateway:ports.range "),
    "pin-reserved": re.compile(r"^ssh-gateway:instances\[[^]]+\]\.port = \d+ is in ssh-gateway:ports.reserved; "),
    "pin-foreign": re.compile(r"^ssh-gateway:instances\[[^]]+\]\.port = \d+ is bound by Pangolin resource "),
    "pin-dup": re.compile(r"^instances .* are pinned to the same port \d+; "),
    "pin-held": re.compile(r"^pin \d+ for instance '[^']+' is held by instance '[^']+'; "),
    "kept-range": re.compile(r"^instance '[^']+' holds port \d+, outside ssh-gateway:ports.range "),
    "kept-reserved": re.compile(r"^ssh-gateway:ports.reserved has \d+, which instance '[^']+' holds; "),
    "kept-foreign": re.compile(r"^instance '[^']+' holds port \d+, which is also bound by Pangolin resource "),
    "exhausted": re.compile(r"^ssh-gateway:ports.range \d+-\d+ is exhausted: no free port for instances? '"),
}


def category(problem: str) -> str:
    matches = [name for name, pattern in CATEGORIES.items() if pattern.match(problem)]
    assert len(matches) == 1, f"unexpected problem: {problem!r}"
    return matches[0]


def predicted_problems(config: Config, previous: AllocationState) -> set[str]:
    """The categories of problem a run must report, from the config alone (a second, naive model)."""
    in_range = set(range(config.start, config.end + 1))
    pins = config.pins
    kept = {name: port for name, port in previous.ports.items() if name in config.instances and name not in pins}
    found: set[str] = set()
    for port in pins.values():
        found |= {"pin-range"} if port not in in_range else set()
        found |= {"pin-reserved"} if port in config.reserved else set()
        found |= {"pin-foreign"} if port in config.foreign else set()
    if len(set(pins.values())) < len(pins):
        found.add("pin-dup")
    if set(pins.values()) & set(kept.values()):
        found.add("pin-held")
    for port in kept.values():
        found |= {"kept-range"} if port not in in_range else set()
        found |= {"kept-reserved"} if port in config.reserved else set()
        found |= {"kept-foreign"} if port in config.foreign else set()
    usable = in_range - config.reserved - config.foreign
    if not found and len(config.instances) > len(usable):
        found.add("exhausted")
    return found


def check_run(config: Config, previous: AllocationState, result: AllocationState) -> None:
    """Every promise the allocator makes about one successful run."""
    ports = result.ports
    held = list(ports.values())
    in_range = set(range(config.start, config.end + 1))

    assert set(ports) == config.instances
    assert list(ports) == sorted(ports)
    assert len(set(held)) == len(held), "a port was handed out twice"
    assert set(held) <= in_range
    assert not set(held) & config.reserved
    assert not set(held) & config.foreign

    for name, port in config.pins.items():
        assert ports[name] == port
    for name, port in previous.ports.items():
        if name in config.instances and config.pins.get(name, port) == port:
            assert ports[name] == port, f"{name} moved from {port} to {ports[name]}"

    # Released: everything freed so far, oldest first, minus what is held again or outside the range.
    released_now = [
        port
        for name, port in sorted(previous.ports.items())
        if name not in config.instances or config.pins.get(name, port) != port
    ]
    history = dedupe_keep_last([*previous.released, *released_now])
    assert result.released == tuple(port for port in history if port in in_range and port not in set(held))

    # Newcomers (in name order) get never-used ports, lowest first, then released ones, oldest first.
    newcomers = [n for n in sorted(config.instances) if n not in previous.ports and n not in config.pins]
    got = [ports[name] for name in newcomers]
    fresh = [port for port in got if port not in history]
    reused = [port for port in got if port in history]
    assert got == fresh + reused, "a released port was handed out before a never-used one"
    assert fresh == sorted(fresh)
    still_free = in_range - set(held) - config.reserved - config.foreign
    never_used_left = still_free - set(history)
    if fresh and never_used_left:
        assert max(fresh) < min(never_used_left), "a lower never-used port was skipped"
    if reused:
        assert not never_used_left, "a released port was reused while a never-used one was free"
        claimed = {ports[name] for name in config.instances if name not in newcomers}
        eligible = [
            port
            for port in history
            if port in in_range and port not in claimed and port not in config.reserved | config.foreign
        ]
        assert reused == eligible[: len(reused)], "released ports were not reused oldest first"
        event("released port reused")


def run_checked(config: Config, previous: AllocationState, shuffle: random.Random) -> AllocationState | None:
    """Run the allocator as a stack run would; check the outcome; return the new state, None on error."""
    predicted = predicted_problems(config, previous)
    try:
        result = allocate(**config.kwargs(previous))
    except AllocationError as error:
        found = {category(problem) for problem in error.problems}
        for name in sorted(found):
            event(f"problem: {name}")  # shown by --hypothesis-show-statistics
        assert predicted, f"unexpected failure: {error}"
        if "exhausted" in found:
            usable = set(range(config.start, config.end + 1)) - config.reserved - config.foreign
            assert len(config.instances) > len(usable)
        assert found - {"exhausted"} == predicted - {"exhausted"}, (found, predicted)
        with pytest.raises(AllocationError) as again:
            allocate(**config.kwargs(previous, shuffle=shuffle))
        assert again.value.problems == error.problems, "problems depend on input order"
        return None
    assert not predicted, f"expected {predicted}, got {result}"
    check_run(config, previous, result)
    assert allocate(**config.kwargs(previous, shuffle=shuffle)) == result, "result depends on input order"
    assert allocate(**config.kwargs(result)) == result, "a second run with the same config changes ports"
    return result


class AllocationMachine(RuleBasedStateMachine):
    """Config changes applied run after run; a failed run leaves state and config as they were."""

    def __init__(self) -> None:
        super().__init__()
        self.config = Config()
        self.state = AllocationState(ports={}, released=())
        self.shuffle = random.Random(0)  # noqa: S311  # test input order, not secrets

    def run(self, config: Config) -> None:
        result = run_checked(config, self.state, self.shuffle)
        if result is not None:  # else the user fixes the config: the change is dropped
            self.config, self.state = config, result

    @rule(names=st.lists(st.sampled_from(NAMES), min_size=1, max_size=4))
    def add_instances(self, names: list[str]) -> None:
        self.run(replace(self.config, instances=self.config.instances | set(names)))

    @precondition(lambda self: self.config.instances)
    @rule(data=st.data())
    def remove_instance(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(sorted(self.config.instances)))
        pins = {n: p for n, p in self.config.pins.items() if n != name}
        self.run(replace(self.config, instances=self.config.instances - {name}, pins=pins))

    @rule(name=st.sampled_from(NAMES), port=PORTS)
    def pin(self, name: str, port: int) -> None:
        pins = {**self.config.pins, name: port}
        self.run(replace(self.config, instances=self.config.instances | {name}, pins=pins))

    @precondition(lambda self: self.state.ports)
    @rule(name=st.sampled_from(NAMES), data=st.data())
    def pin_to_a_held_port(self, name: str, data: st.DataObject) -> None:
        # Swaps, pins onto a kept instance's port, two pins on one port: the interesting collisions.
        port = data.draw(st.sampled_from(sorted(set(self.state.ports.values()))))
        pins = {**self.config.pins, name: port}
        self.run(replace(self.config, instances=self.config.instances | {name}, pins=pins))

    @precondition(lambda self: self.config.pins)
    @rule(data=st.data())
    def unpin(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(sorted(self.config.pins)))
        self.run(replace(self.config, pins={n: p for n, p in self.config.pins.items() if n != name}))

    @rule(port=PORTS)
    def reserve(self, port: int) -> None:
        self.run(replace(self.config, reserved=self.config.reserved | {port}))

    @precondition(lambda self: self.config.reserved)
    @rule(data=st.data())
    def unreserve(self, data: st.DataObject) -> None:
        port = data.draw(st.sampled_from(sorted(self.config.reserved)))
        self.run(replace(self.config, reserved=self.config.reserved - {port}))

    @rule(port=PORTS)
    def bind_foreign(self, port: int) -> None:
        self.run(replace(self.config, foreign=self.config.foreign | {port}))

    @precondition(lambda self: self.config.foreign)
    @rule(data=st.data())
    def unbind_foreign(self, data: st.DataObject) -> None:
        port = data.draw(st.sampled_from(sorted(self.config.foreign)))
        self.run(replace(self.config, foreign=self.config.foreign - {port}))

    @precondition(lambda self: self.state.released)
    @rule(data=st.data(), foreign=st.booleans())
    def block_a_released_port(self, data: st.DataObject, foreign: bool) -> None:
        # A released port that is then reserved or bound elsewhere stays released but must be skipped.
        port = data.draw(st.sampled_from(self.state.released))
        if foreign:
            self.run(replace(self.config, foreign=self.config.foreign | {port}))
        else:
            self.run(replace(self.config, reserved=self.config.reserved | {port}))

    @rule(start=st.integers(min_value=39_998, max_value=40_003), size=st.integers(min_value=1, max_value=12))
    def resize_range(self, start: int, size: int) -> None:
        self.run(replace(self.config, start=start, end=start + size - 1))

    @rule()
    def rerun(self) -> None:
        self.run(self.config)

    @invariant()
    def state_matches_config(self) -> None:
        assert set(self.state.ports) == self.config.instances


TestAllocationMachine = AllocationMachine.TestCase
TestAllocationMachine.settings = settings(
    max_examples=150, stateful_step_count=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@settings(max_examples=200, deadline=None)
@given(
    count=st.integers(min_value=0, max_value=40),
    size=st.integers(min_value=1, max_value=30),
    reserved=st.sets(st.integers(min_value=40000, max_value=40035)),
    foreign=st.sets(st.integers(min_value=40000, max_value=40035)),
)
def test_fresh_allocation_fills_every_free_port_or_reports_exhaustion(
    count: int, size: int, reserved: set[int], foreign: set[int]
) -> None:
    config = Config(
        instances=frozenset(f"n{i:02d}" for i in range(count)),
        reserved=frozenset(reserved),
        foreign=frozenset(foreign),
        end=40000 + size - 1,
    )
    usable = set(range(40000, 40000 + size)) - reserved - foreign
    if count > len(usable):
        with pytest.raises(AllocationError) as info:
            allocate(**config.kwargs(AllocationState(ports={}, released=())))
        assert [category(problem) for problem in info.value.problems] == ["exhausted"]
    else:
        result = allocate(**config.kwargs(AllocationState(ports={}, released=())))
        assert sorted(result.ports.values()) == sorted(usable)[:count]


@settings(max_examples=200, deadline=None)
@given(
    instances=st.sets(st.sampled_from(NAMES)),
    previous=st.dictionaries(st.sampled_from(NAMES), st.integers(min_value=40000, max_value=40015)),
    released=st.lists(st.integers(min_value=39_990, max_value=40_020), max_size=8),
    pins=st.dictionaries(st.sampled_from(NAMES), PORTS, max_size=3),
    reserved=st.sets(PORTS, max_size=4),
    foreign=st.sets(PORTS, max_size=4),
    shuffle=st.randoms(use_true_random=False),
)
def test_input_order_never_changes_the_outcome(
    instances: set[str],
    previous: dict[str, int],
    released: list[int],
    pins: dict[str, int],
    reserved: set[int],
    foreign: set[int],
    shuffle: random.Random,
) -> None:
    # Arbitrary (even inconsistent) previous states: the outcome, result or problems, is the same.
    config = Config(
        instances=frozenset(instances) | set(pins),
        pins=pins,
        reserved=frozenset(reserved),
        foreign=frozenset(foreign),
        end=40015,
    )
    before = AllocationState(ports=previous, released=tuple(released))

    def outcome(rng: random.Random | None) -> AllocationState | list[str]:
        try:
            return allocate(**config.kwargs(before, shuffle=rng))
        except AllocationError as error:
            return error.problems

    assert outcome(shuffle) == outcome(None)
