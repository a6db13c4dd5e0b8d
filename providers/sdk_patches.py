"""Every change this project makes to the pulumi Python SDK (3.259.0), in one place.

Each one cuts a measured cost (docs/scaling.md) and relies on a private shape of the SDK. At run time each steps
aside when that shape is gone, so that an upgraded SDK still works; `tests/unit/test_sdk_patches.py` is the
canary that fails loudly instead, so an upgrade cannot silently drop a speed-up. Change a patch here, change its
canary there.

- once a run, by `patch_the_sdk` (the program calls it first), each unless its variable keeps the SDK's own:
  `drop_sdk_debug_messages` (the 4-6 blocking debug `Log` RPCs per resource; `SSH_GATEWAY_SDK_DEBUG=1`),
  `wait_for_outputs_together` (the SDK's quadratic drain of pending Outputs; `SSH_GATEWAY_SDK_WAIT=first`),
  `cache_resource_types` (each resource's output types worked out anew; `SSH_GATEWAY_SDK_TYPES=each`);
- around each instance's registrations: `declaration_site_only` (a whole Python stack per resource in state);
- before each dynamic resource pickles its provider: `unwrap_batch_setitems` (one more wrapper per resource).

It lives in `providers/`, the lowest floor that may import pulumi, because both floors patch: the program
(`components/`) once a run and around each instance, and every dynamic resource of `providers/`, which
`components/` may import but not the other way round. The pickler fix cannot be applied once a run: the SDK
wraps the pickler again for every provider it pickles, so each dynamic resource undoes it before its own.
"""

from __future__ import annotations

import asyncio
import functools
import os
import pickle
import sys
import types
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any, Final

import pulumi
from pulumi import _types
from pulumi.runtime import resource as sdk_resource
from pulumi.runtime import settings as sdk_settings
from pulumi.runtime import stack as sdk_stack
from pulumi.runtime.proto import source_pb2

__all__ = [
    "DEBUG_KEEP_VARIABLE",
    "TYPES_KEEP_VARIABLE",
    "WAIT_KEEP_VARIABLE",
    "cache_resource_types",
    "declaration_site_only",
    "drop_sdk_debug_messages",
    "patch_the_sdk",
    "unwrap_batch_setitems",
    "wait_for_outputs_together",
]

DEBUG_KEEP_VARIABLE: Final = "SSH_GATEWAY_SDK_DEBUG"
"""Set to 1 to send the SDK's debug messages to the engine as before."""
WAIT_KEEP_VARIABLE: Final = "SSH_GATEWAY_SDK_WAIT"
"""Set to `first` to keep the SDK's one-at-a-time wait."""
TYPES_KEEP_VARIABLE: Final = "SSH_GATEWAY_SDK_TYPES"
"""Set to `each` to let the SDK compute a class's output types for every resource again."""


def patch_the_sdk() -> None:
    """The patches that hold for the rest of the program's run (each unless its variable keeps the SDK's own)."""
    drop_sdk_debug_messages()
    wait_for_outputs_together()
    cache_resource_types()


def _dropped(
    msg: str,  # `pulumi.log.debug`'s signature: the SDK passes some by keyword
    resource: pulumi.Resource | None = None,
    stream_id: int | None = None,
    ephemeral: bool | None = None,
) -> None:
    """`pulumi.log.debug`, sending nothing."""


def drop_sdk_debug_messages() -> None:
    """`pulumi.log.debug` sends nothing.

    The SDK sends four to six debug messages for every resource it registers ("registering resource: ty=...",
    "resource registration prepared", ...), each a blocking `Log` RPC to the engine, which shows them only under
    `pulumi up --debug` (pulumi/pulumi#7292: #7295 cut the worst, these remain). Measured on a no-op preview of
    300 static instances (py-spy): 15% of the program's CPU, plus the engine's work on each message. The program
    sends no debug message of its own, so only the SDK's go.
    """
    if os.environ.get(DEBUG_KEEP_VARIABLE) != "1":
        pulumi.log.debug = _dropped


class _AllAtOnce(types.ModuleType):
    """`asyncio` as `pulumi.runtime.stack` sees it: the same module, but `wait` waits for all."""

    def __getattr__(self, name: str) -> Any:
        return getattr(asyncio, name)

    @staticmethod
    async def wait(
        fs: Iterable[asyncio.Future[Any]], *, timeout: float | None = None, return_when: str = asyncio.ALL_COMPLETED
    ) -> tuple[set[asyncio.Future[Any]], set[asyncio.Future[Any]]]:
        del return_when  # FIRST_COMPLETED is the SDK's; all of them is this patch's point
        return await asyncio.wait(fs, timeout=timeout, return_when=asyncio.ALL_COMPLETED)


def wait_for_outputs_together() -> None:
    """The SDK's last wait is for every pending Output at once instead of one at a time.

    When the program's RPCs are done, `pulumi/runtime/stack.py` `wait_for_rpcs` drains the pending Outputs with
    `asyncio.wait(pending, return_when=FIRST_COMPLETED)` in a loop (pulumi/pulumi#22411): every pass adds a
    done-callback to each pending Output and removes it again, for one completion. With P Outputs that is P
    passes of P each, quadratic in the instances (about 130 Outputs each): a third of the program's CPU on a `+1`
    up of 300 static instances (py-spy). Waiting for all of them (`ALL_COMPLETED`) is one pass per wave of
    Outputs: the loop still picks up Outputs made meanwhile, still ends only when none is pending, and still
    re-raises what a failed one raised, after the others have settled instead of before.
    """
    # The module's `asyncio` global, as `wait_for_rpcs` looks it up at each call; an SDK without it is left alone.
    if os.environ.get(WAIT_KEEP_VARIABLE) != "first" and getattr(sdk_stack, "asyncio", None) is asyncio:
        setattr(sdk_stack, "asyncio", _AllAtOnce("asyncio"))  # noqa: B010 - a private global of the SDK


def cache_resource_types() -> None:
    """Each resource class's output types are worked out once, not per resource.

    The SDK resolves every registered resource's outputs against the types its class annotates
    (`pulumi._types.resource_types`, called from `pulumi.runtime.rpc.resolve_outputs`), and computes them anew
    each time: `typing.get_type_hints` over the class and its bases. A class's annotations do not change while
    the program runs. Measured by py-spy on a +1 `up` of 1000 static instances: 13% of the program's main thread
    (527 of 4130 samples). Callers only read the dict (`resolve_outputs` looks types up in it).
    """
    if os.environ.get(TYPES_KEEP_VARIABLE) == "each" or hasattr(_types.resource_types, "cache_info"):
        return
    _types.resource_types = functools.cache(_types.resource_types)


@contextmanager
def declaration_site_only() -> Iterator[None]:
    """While an instance registers its resources, each one's recorded `sourcePosition` is the line that declared
    it, and no stack is recorded beside it.

    Since v3.195 the SDK stores a resource's whole Python call stack in state (`stackTrace`, pulumi/pulumi#20430):
    the interpreter's, asyncio's, the SDK's and the language host's frames, about 1 KB per resource, which the
    file backend re-serialises, hashes and rewrites at every checkpoint. Nothing turns it off. Here the one frame
    a reader of the state wants is kept as `sourcePosition`: the first frame of this program (not of its .venv)
    that is not a constructor, e.g. the line of `SshInstance` that declared a child, or the line of the program
    that declared the instance, rather than a line inside a resource class (what pulumi/pulumi#18478 asks for).
    The stack itself is left empty, which the engine does not record: a one-frame stack would only repeat
    `sourcePosition` (~60 bytes per resource). Without a project root (unit tests' mocks) or with an SDK that no
    longer has the hooks, nothing changes.
    """
    capture = getattr(sdk_resource, "_get_stack_trace", None)
    position = getattr(sdk_resource, "_get_source_position", None)
    root = sdk_settings.get_root_directory()
    if capture is None or position is None or not root:
        yield
        return
    project, venv = f"{Path(root)}{os.sep}", f"{Path(sys.prefix)}{os.sep}"

    def no_stack() -> Any:
        return source_pb2.StackTrace()

    def declaration_site(stack: source_pb2.StackTrace) -> source_pb2.SourcePosition | None:  # noqa: ARG001 - the SDK hook's signature
        frame: FrameType | None = sys._getframe(1)
        while frame is not None:
            code = frame.f_code
            path = code.co_filename
            if path.startswith(project) and not path.startswith(venv) and code.co_name not in _CONSTRUCTORS:
                return source_pb2.SourcePosition(uri=Path(path).as_uri(), line=frame.f_lineno)
            frame = frame.f_back
        return None

    sdk_resource._get_stack_trace = no_stack
    sdk_resource._get_source_position = declaration_site
    try:
        yield
    finally:
        sdk_resource._get_stack_trace = capture
        sdk_resource._get_source_position = position


# The frames of a resource's own construction, skipped on the way to the line that declared it.
_CONSTRUCTORS: Final = frozenset({"__init__", "_internal_init"})


def unwrap_batch_setitems() -> None:
    """Puts the standard library's `_batch_setitems` back, however deep pulumi's wrappers are.

    `pulumi/dynamic/dynamic.py` `serialize_provider` replaces `pickle._Pickler._batch_setitems` with a
    dict-sorting wrapper around whatever is there, every time it pickles a provider, and never puts it back. The
    N-th dynamic resource of a program is then pickled through N nested wrappers: O(N) work per resource, and a
    `RecursionError` near 1 000 resources (what pulumi/pulumi#17803 reports). Every dynamic resource of this
    project calls this before registering, so exactly one wrapper is ever in place.
    """
    method: Any = pickle._Pickler._batch_setitems  # type: ignore[attr-defined]
    while getattr(method, "__module__", "pickle") != "pickle" and method.__closure__:
        method = next(cell.cell_contents for cell in method.__closure__ if callable(cell.cell_contents))
    pickle._Pickler._batch_setitems = method  # type: ignore[attr-defined]
