"""Dynamic providers that do nothing, for the benchmark's floors.

In their own module, so they are pickled by reference as the project's providers are; a class defined in
`__main__` is pickled by value together with the program's globals (every resource made so far), which would
make the floor slower the bigger N is.
"""

from typing import Any

from pulumi.dynamic import CheckResult, CreateResult, DiffResult, Resource, ResourceProvider, UpdateResult


class Noop(ResourceProvider):
    """Creates nothing: the outputs are the inputs."""

    serialize_as_secret_always = False

    def create(self, props: dict[str, Any]) -> CreateResult:
        return CreateResult(f"noop-{props['index']}", props)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        return DiffResult(changes=any(olds.get(key) != news.get(key) for key in ("index", "port")))

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return UpdateResult(news)


class NoopTable(ResourceProvider):
    """The floor's allocation: one resource whose `check` hands instance i port start + i, so the ports are
    known at preview as the real allocation's are."""

    serialize_as_secret_always = False

    def check(self, _olds: dict[str, Any], news: dict[str, Any]) -> CheckResult:
        start = int(news["start"])
        return CheckResult({**news, "ports": {name: start + i for i, name in enumerate(news["instances"])}}, [])

    def create(self, props: dict[str, Any]) -> CreateResult:
        return CreateResult("table", props)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        return DiffResult(changes=olds.get("ports") != news.get("ports"))

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return UpdateResult(news)


class NoopResource(Resource, module="bench", name="Noop"):
    """One no-op resource."""

    port: Any


class NoopAllocation(Resource, module="bench", name="Table"):
    """The floor's port table."""

    ports: Any
