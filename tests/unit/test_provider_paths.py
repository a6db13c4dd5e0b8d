"""The provider classes stay where every stack's state says they are (providers/__init__.py).

Each dynamic resource keeps its provider pickled in its `__provider` input: dill pickles the class by
reference, as its module path and name. The provider process unpickles it to update or delete the resource, so
a class that moved or was renamed leaves every existing stack with resources no run can delete. These are the
pickles the state of every stack holds; a new provider class must be added here, and none may leave.
"""

from __future__ import annotations

import base64
import importlib
import inspect
import pkgutil

import dill
import pytest
from pulumi.dynamic import ResourceProvider
from pulumi.dynamic.dynamic import serialize_provider

import providers
from providers.sdk_patches import unwrap_batch_setitems

pytestmark = pytest.mark.unit

# (module, class) -> the `__provider` input of each of its resources in state, as `pulumi stack export` shows it.
RECORDED = {
    ("providers.pangolin.provider", "PangolinTcpProvider"): (
        "gASVPQAAAAAAAACMG3Byb3ZpZGVycy5wYW5nb2xpbi5wcm92aWRlcpSME1BhbmdvbGluVGNwUHJvdmlkZXKUk5QpgZR9lGIu"
    ),
    ("providers.pangolin.port_check", "PortCheckProvider"): (
        "gASVPQAAAAAAAACMHXByb3ZpZGVycy5wYW5nb2xpbi5wb3J0X2NoZWNrlIwRUG9ydENoZWNrUHJvdmlkZXKUk5QpgZR9lGIu"
    ),
    ("providers.port_allocation.provider", "PortAllocationProvider"): (
        "gASVRAAAAAAAAACMInByb3ZpZGVycy5wb3J0X2FsbG9jYXRpb24ucHJvdmlkZXKUjBZQb3J0QWxsb2NhdGlvblByb3ZpZGVylJOUKYGULg=="
    ),
    ("providers.host_identity.provider", "SshHostCaProvider"): (
        "gASVPQAAAAAAAACMIHByb3ZpZGVycy5ob3N0X2lkZW50aXR5LnByb3ZpZGVylIwRU3NoSG9zdENhUHJvdmlkZXKUk5QpgZQu"
    ),
    ("providers.host_identity.provider", "SshHostKeyRootProvider"): (
        "gASVQgAAAAAAAACMIHByb3ZpZGVycy5ob3N0X2lkZW50aXR5LnByb3ZpZGVylIwWU3NoSG9zdEtleVJvb3RQcm92aWRlcpSTlCmBlC4="
    ),
    # No program makes an SshHostKey any more (keys are derived), but older stacks hold some: their deletion
    # unpickles this.
    ("providers.host_identity.provider", "SshHostKeyProvider"): (
        "gASVPgAAAAAAAACMIHByb3ZpZGVycy5ob3N0X2lkZW50aXR5LnByb3ZpZGVylIwSU3NoSG9zdEtleVByb3ZpZGVylJOUKYGULg=="
    ),
}


def _provider_classes() -> dict[tuple[str, str], type[ResourceProvider]]:
    """Every ResourceProvider class defined in the providers package."""
    found: dict[tuple[str, str], type[ResourceProvider]] = {}
    for module in pkgutil.walk_packages(providers.__path__, prefix="providers."):
        for _, cls in inspect.getmembers(importlib.import_module(module.name), inspect.isclass):
            if issubclass(cls, ResourceProvider) and cls.__module__.startswith("providers."):
                found[(cls.__module__, cls.__qualname__)] = cls
    return found


def test_every_provider_class_is_where_state_records_it() -> None:
    assert set(_provider_classes()) == set(RECORDED), (
        "a provider class moved, was renamed, or is new: moving breaks every stack's state (providers/__init__.py);"
        " a new one is added to RECORDED"
    )


@pytest.mark.parametrize("path", list(RECORDED), ids=lambda path: ".".join(path))
def test_the_pickle_in_state_still_loads(path: tuple[str, str]) -> None:
    # As pulumi's dynamic provider process does (pulumi/dynamic/__main__.py `get_provider`).
    provider = dill.loads(base64.b64decode(RECORDED[path]))  # noqa: S301 - the project's own pickles
    assert (type(provider).__module__, type(provider).__qualname__) == path


@pytest.mark.parametrize("path", list(RECORDED), ids=lambda path: ".".join(path))
def test_a_provider_pickles_today_as_state_records_it(path: tuple[str, str]) -> None:
    """Byte for byte: the class's path and nothing else (no API key, no client), as resources pickle it."""
    cls = _provider_classes()[path]
    try:
        assert serialize_provider(cls()) == RECORDED[path]
    finally:
        unwrap_batch_setitems()
