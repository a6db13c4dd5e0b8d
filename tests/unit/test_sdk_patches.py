"""The SDK patches (providers/sdk_patches.py): what each does, and the canary for the SDK shapes they rely on.

At run time each patch steps aside when the SDK no longer has the shape it patches, so a pulumi upgrade would
only make runs slower. The canary turns each of those guards, and each call the patch counts on, into an
assertion over the installed SDK: an upgrade that changes one fails here, by name, instead. The last test shows
each canary failing on an SDK of another shape.
"""

from __future__ import annotations

import ast
import asyncio
import functools
import inspect
import pickle
import textwrap
from collections.abc import Callable
from typing import Any

import pulumi
import pytest
from pulumi import _types
from pulumi.dynamic import ResourceProvider
from pulumi.dynamic import dynamic as sdk_dynamic
from pulumi.runtime import resource as sdk_resource
from pulumi.runtime import rpc as sdk_rpc
from pulumi.runtime import stack as sdk_stack
from pulumi.runtime.proto import source_pb2

from providers import sdk_patches
from providers.pangolin.resource import PangolinTcpResource

pytestmark = pytest.mark.unit


def test_debug_messages_are_dropped_unless_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[str] = []
    monkeypatch.setattr(pulumi.log, "debug", lambda msg, *_args, **_kwargs: sent.append(msg))
    monkeypatch.setenv(sdk_patches.DEBUG_KEEP_VARIABLE, "1")
    sdk_patches.drop_sdk_debug_messages()
    pulumi.log.debug("kept")
    monkeypatch.delenv(sdk_patches.DEBUG_KEEP_VARIABLE)
    sdk_patches.drop_sdk_debug_messages()
    # As the SDK calls it, positionally and by keyword.
    pulumi.log.debug("dropped")
    pulumi.log.debug(msg="dropped", resource=None, stream_id=0, ephemeral=True)
    assert sent == ["kept"]


def test_the_sdk_wait_returns_when_all_are_done_and_can_be_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sdk_stack, "asyncio", asyncio)
    monkeypatch.setenv(sdk_patches.WAIT_KEEP_VARIABLE, "first")
    sdk_patches.wait_for_outputs_together()
    assert getattr(sdk_stack, "asyncio") is asyncio  # noqa: B009
    monkeypatch.delenv(sdk_patches.WAIT_KEEP_VARIABLE)
    sdk_patches.wait_for_outputs_together()
    shim = getattr(sdk_stack, "asyncio")  # noqa: B009
    assert shim is not asyncio and shim.FIRST_COMPLETED == asyncio.FIRST_COMPLETED  # the rest is asyncio's

    async def drain() -> tuple[int, int]:
        fast, slow = asyncio.ensure_future(asyncio.sleep(0)), asyncio.ensure_future(asyncio.sleep(0.05))
        # As the SDK calls it: FIRST_COMPLETED, which would return with `slow` pending.
        done, pending = await shim.wait([fast, slow], return_when=asyncio.FIRST_COMPLETED)
        return len(done), len(pending)

    # Not asyncio.run, which leaves no current loop behind for the Pulumi mocks of the tests after this one.
    loop = asyncio.new_event_loop()
    try:
        assert loop.run_until_complete(drain()) == (2, 0)
    finally:
        loop.close()


def test_output_types_are_computed_once_per_class_unless_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    computed: list[type] = []
    sdk = _types.resource_types

    def counting(cls: type) -> dict[str, type]:
        computed.append(cls)
        return sdk(cls)

    monkeypatch.setattr(_types, "resource_types", counting)
    monkeypatch.setenv(sdk_patches.TYPES_KEEP_VARIABLE, "each")
    sdk_patches.cache_resource_types()
    _types.resource_types(PangolinTcpResource)
    _types.resource_types(PangolinTcpResource)
    assert computed == [PangolinTcpResource] * 2

    monkeypatch.delenv(sdk_patches.TYPES_KEEP_VARIABLE)
    sdk_patches.cache_resource_types()
    sdk_patches.cache_resource_types()  # a second call wraps nothing again
    first = _types.resource_types(PangolinTcpResource)
    assert _types.resource_types(PangolinTcpResource) is first
    assert first == sdk(PangolinTcpResource) and "proxy_port" in first
    assert computed == [PangolinTcpResource] * 3


# The canary: one check a patch, each asserting what the patch's guard tests and what its effect relies on.


def _calls(function: Callable[..., Any]) -> list[ast.Call]:
    """The calls in a function's source, as the SDK wrote it."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    return [node for node in ast.walk(tree) if isinstance(node, ast.Call)]


def _is(node: ast.expr, dotted: str) -> bool:
    """Whether an expression is the name or attribute chain `dotted`, e.g. `asyncio.wait`."""
    return ast.unparse(node) == dotted


def _shape_for_dropped_debug() -> None:
    # The SDK logs through `log.debug` looked up on the module at each call, and `log` is `pulumi.log`, whose
    # `debug` has the parameters `_dropped` accepts.
    assert vars(sdk_resource).get("log") is pulumi.log, "pulumi.runtime.resource no longer logs through pulumi.log"
    assert any(_is(c.func, "log.debug") for c in _calls(sdk_resource.register_resource)), (
        "register_resource no longer sends its debug messages through log.debug"
    )
    parameters = list(inspect.signature(pulumi.log.debug).parameters)
    assert parameters == ["msg", "resource", "stream_id", "ephemeral"], f"pulumi.log.debug is now {parameters}"


def _shape_for_waiting_together() -> None:
    # The guard: `wait_for_rpcs` finds `asyncio` as its module's global; and the cost it cuts: it waits with
    # FIRST_COMPLETED.
    assert vars(sdk_stack).get("asyncio") is asyncio, "pulumi.runtime.stack no longer has asyncio as a global"
    waits = [c for c in _calls(sdk_stack.wait_for_rpcs) if _is(c.func, "asyncio.wait")]
    assert waits, "wait_for_rpcs no longer calls asyncio.wait"
    return_when = [ast.unparse(k.value) for c in waits for k in c.keywords if k.arg == "return_when"]
    assert return_when == ["asyncio.FIRST_COMPLETED"], f"wait_for_rpcs now waits with {return_when}"


def _shape_for_cached_types() -> None:
    # The guard: the SDK does not cache `resource_types` itself; and `resolve_outputs` looks it up on the module
    # at each call, with the class as its one argument.
    assert not hasattr(_types.resource_types, "cache_info"), "pulumi._types.resource_types is cached already"
    assert vars(sdk_rpc).get("_types") is _types, "rpc no longer imports pulumi._types"
    calls = [c for c in _calls(sdk_rpc.resolve_outputs) if _is(c.func, "_types.resource_types")]
    assert calls, "resolve_outputs no longer calls _types.resource_types"
    assert list(inspect.signature(_types.resource_types).parameters) == ["resource_cls"]


def _shape_for_declaration_site() -> None:
    # The guard: the two hooks exist; and `register_resource` calls them as its module's globals, the position
    # from the stack, and sends both in the request.
    for hook in ("_get_stack_trace", "_get_source_position"):
        assert callable(getattr(sdk_resource, hook, None)), f"pulumi.runtime.resource has no {hook}"
    calls = _calls(sdk_resource.register_resource)
    assert any(_is(c.func, "_get_stack_trace") and not c.args for c in calls), "no _get_stack_trace() call"
    assert any(_is(c.func, "_get_source_position") and len(c.args) == 1 for c in calls), (
        "no _get_source_position(stack) call"
    )
    sent = {k.arg for c in calls for k in c.keywords}
    assert {"sourcePosition", "stackTrace"} <= sent, "register_resource no longer sends both"
    assert set(source_pb2.SourcePosition.DESCRIPTOR.fields_by_name) >= {"uri", "line"}
    assert "frames" in source_pb2.StackTrace.DESCRIPTOR.fields_by_name


def _shape_for_unwrapped_pickler() -> None:
    # What `unwrap_batch_setitems` undoes: `serialize_provider` leaves a wrapper around the pickler's
    # `_batch_setitems`, a closure over the one before; and the guard: unwrapping reaches the standard library's.
    sdk_patches.unwrap_batch_setitems()
    standard: Any = pickle._Pickler._batch_setitems  # type: ignore[attr-defined]
    assert (standard.__module__, standard.__qualname__) == ("pickle", "_Pickler._batch_setitems")
    sdk_dynamic.serialize_provider(ResourceProvider())
    sdk_dynamic.serialize_provider(ResourceProvider())
    wrapper: Any = pickle._Pickler._batch_setitems  # type: ignore[attr-defined]
    try:
        assert wrapper is not standard, "serialize_provider no longer wraps the pickler: the patch is dead"
        assert wrapper.__module__ != "pickle" and wrapper.__closure__, "the wrapper is no closure to unwrap"
    finally:
        sdk_patches.unwrap_batch_setitems()
    assert pickle._Pickler._batch_setitems is standard, "unwrapping no longer reaches the standard library's"  # type: ignore[attr-defined]


CANARIES = {
    "drop_sdk_debug_messages": _shape_for_dropped_debug,
    "wait_for_outputs_together": _shape_for_waiting_together,
    "cache_resource_types": _shape_for_cached_types,
    "declaration_site_only": _shape_for_declaration_site,
    "unwrap_batch_setitems": _shape_for_unwrapped_pickler,
}


def test_every_patch_has_a_canary() -> None:
    patches = {name for name in sdk_patches.__all__ if callable(getattr(sdk_patches, name))} - {"patch_the_sdk"}
    assert patches == set(CANARIES)


@pytest.mark.parametrize("patch", list(CANARIES))
def test_the_installed_sdk_has_the_shape_the_patch_relies_on(patch: str) -> None:
    CANARIES[patch]()


def _sdk_logs_elsewhere(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sdk_resource, "log", object())


def _sdk_waits_for_all(monkeypatch: pytest.MonkeyPatch) -> None:
    async def wait_for_rpcs() -> None:
        await asyncio.wait(set(), return_when=asyncio.ALL_COMPLETED)

    monkeypatch.setattr(sdk_stack, "wait_for_rpcs", wait_for_rpcs)


def _sdk_imports_asyncio_elsewhere(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(sdk_stack, "asyncio")


def _sdk_caches_types(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_types, "resource_types", functools.cache(_types.resource_types))


def _sdk_resolves_types_otherwise(monkeypatch: pytest.MonkeyPatch) -> None:
    def resolve_outputs(res: object) -> dict[str, type]:
        return {"id": type(res)}  # types found some other way

    monkeypatch.setattr(sdk_rpc, "resolve_outputs", resolve_outputs)


def _sdk_has_no_stack_hook(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(sdk_resource, "_get_stack_trace")


def _sdk_pickles_without_wrapping(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sdk_dynamic, "serialize_provider", lambda provider: pickle.dumps(provider).hex())


OTHER_SHAPES = [
    ("drop_sdk_debug_messages", _sdk_logs_elsewhere),
    ("wait_for_outputs_together", _sdk_waits_for_all),
    ("wait_for_outputs_together", _sdk_imports_asyncio_elsewhere),
    ("cache_resource_types", _sdk_caches_types),
    ("cache_resource_types", _sdk_resolves_types_otherwise),
    ("declaration_site_only", _sdk_has_no_stack_hook),
    ("unwrap_batch_setitems", _sdk_pickles_without_wrapping),
]


@pytest.mark.parametrize(("patch", "reshape"), OTHER_SHAPES, ids=[r.__name__ for _, r in OTHER_SHAPES])
def test_each_canary_fails_on_an_sdk_of_another_shape(
    patch: str, reshape: Callable[[pytest.MonkeyPatch], None], monkeypatch: pytest.MonkeyPatch
) -> None:
    reshape(monkeypatch)
    with pytest.raises(AssertionError):
        CANARIES[patch]()
