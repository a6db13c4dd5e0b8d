"""The benchmark's floors: the engine's own cost for N instances, with providers that do nothing.

`shape: bare` is N no-op dynamic resources. `shape: graph` is this project's resource graph with no-op
providers: one port table (the allocation) and, per instance, a component with one child that takes its
port from the table, and the component's registered outputs; the stack exports each instance's port.
"""

import pulumi

# A module beside this program (the floor's own project dir, not a package): mypy checks it as benchmarks.floor.noop.
from noop import Noop, NoopAllocation, NoopResource, NoopTable  # type: ignore[import-not-found]

from providers.pickling import unwrap_batch_setitems

config = pulumi.Config()
count = config.require_int("count")
shape = config.require("shape")
names = [f"i{n:05d}" for n in range(count)]


def bare() -> dict[str, object]:
    for index, name in enumerate(names):
        # As the project's resources do: without it the N-th pickle nests N wrappers (providers/pickling.py).
        unwrap_batch_setitems()
        NoopResource(Noop(), name, {"index": index, "port": None})
    return {}


def graph() -> dict[str, object]:
    unwrap_batch_setitems()
    table = NoopAllocation(NoopTable(), "ports", {"instances": names, "start": 40000, "ports": None})
    ports = {}
    for index, name in enumerate(names):
        component = pulumi.ComponentResource("bench:index:Instance", name)
        port = table.ports.apply(lambda table_ports, name=name: int(table_ports[name]))
        unwrap_batch_setitems()
        child = NoopResource(
            Noop(), f"{name}-pangolin", {"index": index, "port": port}, pulumi.ResourceOptions(parent=component)
        )
        component.register_outputs({"port": child.port})
        ports[name] = child.port
    return {"ports": ports}


if shape not in ("bare", "graph"):
    raise pulumi.RunError(f"shape={shape!r} is not allowed: expected bare or graph")
for key, value in (bare() if shape == "bare" else graph()).items():
    pulumi.export(key, value)
pulumi.export("count", count)
