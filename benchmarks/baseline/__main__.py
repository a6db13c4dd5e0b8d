"""N dynamic resources with a provider that does nothing: what the engine alone costs per resource."""

import pulumi
from noop import Noop, NoopResource

count = pulumi.Config().require_int("count")
wrap = pulumi.Config().get_bool("wrap") or False
for index in range(count):
    parent = pulumi.ComponentResource("bench:index:Wrap", f"wrap-{index:05d}") if wrap else None
    NoopResource(Noop(), f"noop-{index:05d}", {"index": index}, pulumi.ResourceOptions(parent=parent))
pulumi.export("count", count)
