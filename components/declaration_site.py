"""`declaration_site_only`: each resource's recorded source position is the line that declared it, no stack."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any, Final

from pulumi.runtime import resource as sdk_resource
from pulumi.runtime import settings as sdk_settings
from pulumi.runtime.proto import source_pb2

__all__ = ["declaration_site_only"]


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
