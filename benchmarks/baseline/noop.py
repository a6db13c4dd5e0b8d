"""A dynamic provider that does nothing. In its own module, so it is pickled by reference as the
project's providers are; a class defined in `__main__` is pickled by value together with the program's
globals (every resource made so far), which would make the yardstick slower the bigger N is."""

from typing import Any

from pulumi.dynamic import CreateResult, DiffResult, Resource, ResourceProvider


class Noop(ResourceProvider):
    serialize_as_secret_always = False

    def create(self, props: dict[str, Any]) -> CreateResult:
        return CreateResult(f"noop-{props['index']}", props)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        return DiffResult(changes=olds.get("index") != news.get("index"))


class NoopResource(Resource, module="bench", name="Noop"):
    pass
