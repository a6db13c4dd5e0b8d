"""The objects a discovered instance makes in its tenant's namespace, and the ones already there that stop it
(docs/cluster-instances.md, "Tenants are kept apart").

For each instance, the stack creates its `ssh-<instance>` Service (`from: pods`) and, with host identity on, its
`ssh-<instance>-host-key` Secret, in the object's namespace. If an object of that name is there and is not this
stack's (another stack's mark, or none: the platform's own), the stack cannot create its own: the API server
refuses the create, or, worse, the stack would apply over the other's object. Either way that is known before
anything is written, so `discover` refuses that object alone (`occupant_problem`) and the rest converges, instead
of an `up` that fails at every run and stops every other tenant's new pod.

Which names to look up is decided here (`names_to_check`), the looking up is the reader's
(`ssh_gateway.kube.read_occupants`: metadata-only gets by name, no listing of Secrets).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from .cluster import ClusterObject, Listing, NamedObject, Occupants
from .discovery_records import Remembered
from .names import DiscoverFrom, host_key_secret_name, service_name
from .settings import Discovery, HostIdentityOn, Instance, Settings

__all__ = ["claimed_name", "names_to_check", "occupant_problem"]


def claimed_name(section: Discovery, obj: ClusterObject) -> str | None:
    """The instance name the object claims: the `nameLabel` value, else the object's name (a Service's without
    `ssh-`); None when it has no `nameLabel` label."""
    label = section.name_label
    if label is not None:
        return obj.labels.get(label) or None
    if obj.kind is DiscoverFrom.SERVICES:
        return obj.name.removeprefix("ssh-")
    return obj.name


def wanted_objects(kind: DiscoverFrom, namespace: str, name: str, *, secret: bool) -> list[NamedObject]:
    """What the stack creates for instance `name` of a `kind` object in `namespace`: its Service (from pods) and,
    with `secret`, its host-key Secret."""
    wanted: list[NamedObject] = []
    if kind is DiscoverFrom.PODS:
        wanted.append(NamedObject(kind="Service", namespace=namespace, name=service_name(name)))
    if secret:
        wanted.append(NamedObject(kind="Secret", namespace=namespace, name=host_key_secret_name(name)))
    return wanted


def _served(memory: Mapping[str, Remembered], name: str, obj: ClusterObject) -> bool:
    """Whether the stack serves the instance already from this namespace and kind of object: its run made the
    objects then, and what it made carries its mark."""
    known = memory.get(name)
    return known is not None and known.namespace == obj.namespace and known.kind is obj.kind


def names_to_check(listing: Listing, memory: Mapping[str, Remembered], settings: Settings) -> list[NamedObject]:
    """The Services and host-key Secrets this run may create for instances it does not serve yet: the names the
    reader looks up. Every Secret name with host identity on, as an instance's pinned `hostKey` (which makes none)
    is known only once its annotations are read; `occupant_problem` asks only about what the instance makes."""
    section = settings.discovery
    if section is None:
        return []
    secret = isinstance(settings.host_identity, HostIdentityOn)
    found: dict[NamedObject, None] = {}
    for obj in listing.objects:
        name = claimed_name(section, obj)
        if name is not None and not _served(memory, name, obj):
            found.update(dict.fromkeys(wanted_objects(obj.kind, obj.namespace, name, secret=secret)))
    return list(found)


def occupant_problem(
    settings: Settings, instance: Instance, obj: ClusterObject, occupants: Occupants, own_mark: str
) -> str | None:
    """Why the object's instance cannot have its Service or host-key Secret: one of that name is there and is not
    this stack's (`own_mark`); None when nothing is in the way."""
    wanted = wanted_objects(obj.kind, obj.namespace, instance.name, secret=settings.delivers_secret(instance))
    for named in _in_the_way(wanted, occupants, own_mark):
        mark = occupants[named]
        whose = f"stack {mark}'s" if mark else "not made by an ssh-gateway stack: no ssh-gateway/stack annotation"
        return (
            f"{named.ref} exists and is not this stack's ({whose}), and this instance needs its own {named.kind} "
            f"of that name: remove or rename that {named.kind}, or give the instance another name"
        )
    return None


def _in_the_way(wanted: Iterable[NamedObject], occupants: Occupants, own_mark: str) -> list[NamedObject]:
    return [named for named in wanted if named in occupants and occupants[named] != own_mark]
