"""N dynamic resources with a provider that does nothing: what the engine alone costs per resource."""

from typing import Any

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, Resource, ResourceProvider


class Noop(ResourceProvider):
    serialize_as_secret_always = False

    def create(self, props: dict[str, Any]) -> CreateResult:
        return CreateResult(f"noop-{props['index']}", props)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        return DiffResult(changes=olds.get("index") != news.get("index"))


class NoopResource(Resource, module="bench", name="Noop"):
    pass


count = pulumi.Config().require_int("count")
wrap = pulumi.Config().get_bool("wrap") or False
for index in range(count):
    parent = pulumi.ComponentResource("bench:index:Wrap", f"wrap-{index:05d}") if wrap else None
    NoopResource(Noop(), f"noop-{index:05d}", {"index": index}, pulumi.ResourceOptions(parent=parent))
pulumi.export("count", count)
