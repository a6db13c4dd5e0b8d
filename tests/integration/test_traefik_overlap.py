"""Two stacks' `up`s overlapping on one org and range, watched through the real Traefik: at no sample does Traefik
hold two routers on one entry point, so no port is ever served by two instances at once (the port check disables a
younger resource on a taken port; docs/pangolin-api.md §2.4.1: Pangolin emits a router per enabled resource, and
two on one port leave the choice to Traefik's ordering)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pangolin_emulator.harness import EmulatorHandle
from ssh_gateway.local.traefik import TraefikProcess

from .conftest import StackFactory, stack_config, static_instance
from .local_ports import free_port_block
from .reliability import PUT_RESOURCE, names_in, start_up, wait_until
from .traefik_sampler import RouterSampler

pytestmark = pytest.mark.integration


def test_overlapping_ups_never_give_traefik_two_routers_on_one_entry_point(
    emulator: EmulatorHandle, make_stack: StackFactory, tmp_path: Path
) -> None:
    size, ports = 8, free_port_block(20)
    port_range = f"{ports.start}-{ports.stop - 1}"
    names = {side: [f"{side}-{n:02d}" for n in range(size)] for side in "cd"}
    c = make_stack(stack_config(emulator, [static_instance(names["c"][0])], port_range=port_range))
    # Traefik's static configuration from the stack's own output: the whole range, before the contest.
    entry_points = {k: v.value for k, v in c.up().outputs.items()}["gateway"]["traefikEntryPoints"]
    c = make_stack(stack_config(emulator, [static_instance(n) for n in names["c"]], port_range=port_range), name=c.name)
    d = make_stack(stack_config(emulator, [static_instance(n) for n in names["d"]], port_range=port_range))
    with (
        TraefikProcess(tmp_path / "traefik", entry_points, emulator.traefik_config_url) as traefik,
        RouterSampler(traefik) as sampler,
    ):
        # C creates one step at a time with a few calls held 1 s; D starts at C's next create.
        emulator.set_faults(0.1, seed=3, kinds=("timeout",), delay=1.0)
        before = emulator.counters().get(PUT_RESOURCE, 0)
        first = start_up(c, tmp_path / "c.log", "--parallel", "1")
        wait_until(lambda: emulator.counters().get(PUT_RESOURCE, 0) > before, "C's next create", process=first,
                   timeout=180)  # fmt: skip
        second = start_up(d, tmp_path / "d.log")
        wait_until(lambda: names_in(emulator, d) > 0, "D's first create", process=second, timeout=180)
        emulator.set_faults(0.0)
        first.wait(timeout=400)
        second.wait(timeout=400)
        c.up(color="never")
        d.up(color="never")
        traefik.wait_for_routers(lambda rs: len(rs) == 2 * size, timeout=60)
    assert sampler.samples > 20, (sampler.samples, sampler.missed)
    assert sampler.doubles == {}, f"entry points that held two routers at one sample: {sampler.doubles}"
    assert emulator.doubly_bound_ports() == {}
