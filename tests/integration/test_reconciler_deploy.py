"""deploy/reconciler/'s overlays against the real kube-apiserver: each is rendered with `kubectl kustomize` and
applied with `kubectl apply --server-side --dry-run=server` (strict field validation), as docs/reconciler.md has a
platform team do; and its RBAC grants the reconciler what it needs and nothing more (the API server's own
authorizer answers, through SubjectAccessReviews and a request made as the service account)."""

from __future__ import annotations

import subprocess
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from pulumi import automation as auto

from pangolin_emulator.harness import EmulatorHandle
from ssh_gateway.local.control_plane import ControlPlane
from ssh_gateway.local.kubectl import OVERLAYS, apply, render

from .conftest import StackFactory, stack_config
from .reliability import kill_tree, start_up

pytestmark = pytest.mark.integration

STATUS_NS = "ssh-gateway"
SERVICE_ACCOUNT = "ssh-gateway-reconciler"
LEASE, EVENTS = "coordination.k8s.io", "events.k8s.io"


@dataclass(frozen=True)
class Overlay:
    name: str
    kind: str
    """The selected kind (`discovery.from`)."""
    namespaces: tuple[str, ...]
    """The selected namespaces."""


OVERLAY_CASES = [
    Overlay("from-pods", "pods", ("gpu-users",)),
    Overlay("from-services", "services", ("team-a", "team-b")),
]

# (verbs, resource, where, API group). A resource KIND is the overlay's selected kind;
# where is `selected` (each selected namespace), `status`, `default` (a namespace no stack selects) or `cluster`.
GRANTED = [
    ("get list watch", "KIND", "selected", ""),
    ("get list watch create update patch delete", "secrets", "selected", ""),  # host keys; the watch of deletes
    ("create patch", "events", "selected", EVENTS),  # on the pods or Services it acts on
    ("get list watch create update patch delete", "configmaps", "status", ""),  # the status ConfigMaps
    ("get create update", "leases", "status", LEASE),  # a Lease per stack
    ("get", "pods", "status", ""),  # whether the replica whose Lease expired is gone
]
GRANTED_FROM_PODS = [("get list watch create update patch delete", "services", "selected", "")]  # ssh-<instance>
FORBIDDEN = [
    ("list", "KIND", "status", ""),  # only the selected namespaces
    ("list", "KIND", "default", ""),
    ("list", "KIND", "cluster", ""),
    ("create patch delete", "KIND", "selected", ""),  # the selected kind is read, never written
    ("get create", "secrets", "status", ""),  # no Secret outside the selected namespaces
    ("get create", "secrets", "default", ""),
    ("create", "configmaps", "selected", ""),  # the status channel lives in the status namespace only
    ("update", "leases", "selected", LEASE),
    ("delete", "leases", "status", LEASE),
    ("get list delete", "events", "selected", EVENTS),  # Events are written, never read back or removed
    ("create", "events", "selected", ""),  # the core v1 Events API
    ("create", "events", "status", EVENTS),
    ("create", "events", "default", EVENTS),
    ("list", "namespaces", "cluster", ""),
    ("list", "nodes", "cluster", ""),
    ("create", "rolebindings", "status", "rbac.authorization.k8s.io"),
    ("create", "deployments", "status", "apps"),
]

RBAC_KINDS = ("ServiceAccount", "Role", "RoleBinding")
"""The overlay's objects that say what the reconciler may do."""

FORBIDDEN_FROM_SERVICES = [("list", "pods", "selected", "")]  # the platform's Services are read, never its pods

Attributes = tuple[str, str, str | None, str]


def expand(rows: list[tuple[str, str, str, str]], overlay: Overlay, renamed: Mapping[str, str]) -> list[Attributes]:
    """Each row as (verb, resource, namespace, group) per verb and namespace, in the test's namespace names."""
    resources = {"KIND": overlay.kind}
    places: dict[str, list[str | None]] = {
        "selected": [renamed[n] for n in overlay.namespaces],
        "status": [renamed[STATUS_NS]],
        "default": ["default"],
        "cluster": [None],
    }
    return [
        (verb, resources.get(resource, resource), namespace, group)
        for verbs, resource, where, group in rows
        for verb in verbs.split()
        for namespace in places[where]
    ]


def rendered(overlay: Overlay, renamed: Mapping[str, str]) -> list[dict[str, Any]]:
    """The overlay's objects, its namespaces renamed (a fresh set per test, in the session's one API server)."""
    docs = render(OVERLAYS / overlay.name)
    for doc in docs:
        meta = doc["metadata"]
        if doc["kind"] == "Namespace":
            meta["name"] = renamed[meta["name"]]
        else:
            meta["namespace"] = renamed[meta["namespace"]]
        for subject in doc.get("subjects", ()):
            subject["namespace"] = renamed[subject["namespace"]]
    return docs


def reconciler_subject(status: str) -> tuple[str, list[str]]:
    """The user and groups the API server gives the reconciler's service account in namespace `status`."""
    user = f"system:serviceaccount:{status}:{SERVICE_ACCOUNT}"
    return user, ["system:serviceaccounts", f"system:serviceaccounts:{status}", "system:authenticated"]


@pytest.fixture(params=OVERLAY_CASES, ids=lambda o: o.name)
def overlay(request: pytest.FixtureRequest) -> Overlay:
    case: Overlay = request.param
    return case


@pytest.fixture
def renamed(overlay: Overlay, kube: ControlPlane) -> dict[str, str]:
    """The overlay's namespaces, renamed and made (the selected ones exist before the reconciler is installed;
    the status namespace is made here too, so a dry run of its Role has a namespace to land in)."""
    names = {n: f"it-{uuid.uuid4().hex[:8]}" for n in (STATUS_NS, *overlay.namespaces)}
    for name in names.values():
        kube.create_namespace(name)
    return names


@pytest.fixture
def api(kube: ControlPlane) -> Iterator[httpx.Client]:
    with kube.client() as client:
        yield client


def test_each_overlay_renders_and_passes_a_server_side_dry_run(
    overlay: Overlay, renamed: dict[str, str], kube: ControlPlane, api: httpx.Client
) -> None:
    started = time.monotonic()
    docs = rendered(overlay, renamed)
    warnings = apply(docs, kube.kubeconfig, dry_run=True)
    print(f"{overlay.name}: kubectl kustomize + apply --dry-run=server in {time.monotonic() - started:.2f} s")
    assert warnings == ""  # e.g. a deprecated field, or an unknown one under --validate=strict
    status = renamed[STATUS_NS]
    placed = sorted((d["kind"], d["metadata"].get("namespace", d["metadata"]["name"])) for d in docs)
    selected = [(kind, renamed[n]) for n in overlay.namespaces for kind in ("Role", "RoleBinding")]
    base = [("Namespace", status), ("ServiceAccount", status), ("Role", status), ("RoleBinding", status)]
    assert placed == sorted([*base, ("Deployment", status), *selected])
    # Nothing was made by the dry run.
    assert api.get(f"/apis/apps/v1/namespaces/{status}/deployments").json()["items"] == []


def test_each_overlays_rbac_grants_what_the_reconciler_needs_and_forbids_the_rest(
    overlay: Overlay, renamed: dict[str, str], kube: ControlPlane, api: httpx.Client
) -> None:
    rbac = [d for d in rendered(overlay, renamed) if d["kind"] in RBAC_KINDS]
    apply(rbac, kube.kubeconfig, dry_run=False)
    status = renamed[STATUS_NS]
    user, groups = reconciler_subject(status)

    def allowed(verb: str, resource: str, namespace: str | None, group: str) -> bool:
        attributes = {"verb": verb, "resource": resource, "group": group}
        if namespace is not None:
            attributes["namespace"] = namespace
        review = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {"user": user, "groups": groups, "resourceAttributes": attributes},
        }
        answer = api.post("/apis/authorization.k8s.io/v1/subjectaccessreviews", json=review)
        answer.raise_for_status()
        return bool(answer.json()["status"].get("allowed"))

    granted = expand(GRANTED + (GRANTED_FROM_PODS if overlay.kind == "pods" else []), overlay, renamed)
    forbidden = expand(FORBIDDEN + (FORBIDDEN_FROM_SERVICES if overlay.kind == "services" else []), overlay, renamed)
    assert [g for g in granted if not allowed(*g)] == []
    assert [f for f in forbidden if allowed(*f)] == []

    # And a real request as the service account: the API server answers 403 outside what it grants.
    as_reconciler = {"Impersonate-User": user, "Impersonate-Group": groups[0]}
    selected = renamed[overlay.namespaces[-1]]
    assert api.get(f"/api/v1/namespaces/{selected}/{overlay.kind}", headers=as_reconciler).status_code == 200
    assert api.get(f"/api/v1/namespaces/{status}/{overlay.kind}", headers=as_reconciler).status_code == 403
    assert api.get(f"/api/v1/namespaces/{status}/secrets", headers=as_reconciler).status_code == 403


@pytest.mark.parametrize("overlay", [OVERLAY_CASES[0]], ids=lambda o: o.name, indirect=True)
def test_an_up_with_only_the_reconcilers_rbac_makes_an_instance_and_removes_it_without_waiting_on_a_listing(
    overlay: Overlay,
    renamed: dict[str, str],
    kube: ControlPlane,
    api: httpx.Client,
    emulator: EmulatorHandle,
    make_stack: StackFactory,
    tmp_path: Path,
) -> None:
    """The stack's `up` as the reconciler's service account (impersonated), with exactly the overlay's Roles.
    pulumi-kubernetes waits for each delete with an informer of the kind in the namespace (a list and a watch),
    which never syncs without them (pulumi/pulumi-kubernetes#4580): when the Roles granted Services and Secrets
    by name only, the `up` that removed an instance never ended."""
    apply([d for d in rendered(overlay, renamed) if d["kind"] in RBAC_KINDS], kube.kubeconfig, dry_run=False)
    status, selected = renamed[STATUS_NS], renamed[overlay.namespaces[0]]
    kubeconfig = impersonating(kube.kubeconfig, *reconciler_subject(status), tmp_path / "reconciler.kubeconfig")
    discovery = {
        "from": "pods",
        "namespaces": [selected],
        "selector": EXPOSE,
        "nameLabel": NAME_LABEL,
        "statusNamespace": status,
        "gracePeriod": 0,
    }
    kubernetes = {"namespace": selected, "kubeconfig": str(kubeconfig), "nodeIp": "127.0.0.1"}
    stack = make_stack(stack_config(emulator, [], kubernetes=kubernetes, discovery=discovery))
    pod = {"metadata": {"name": "alice-0", "labels": {**EXPOSE, NAME_LABEL: "alice"}}, "spec": {"containers": [SSHD]}}
    api.post(f"/api/v1/namespaces/{selected}/pods", json=pod).raise_for_status()

    assert _up(stack, tmp_path / "up-1.log") == 0
    assert _names(api, selected, "services") == ["ssh-alice"]
    assert _names(api, selected, "secrets") == ["ssh-alice-host-key"]

    api.delete(f"/api/v1/namespaces/{selected}/pods/alice-0?gracePeriodSeconds=0").raise_for_status()
    assert _up(stack, tmp_path / "up-2.log") == 0
    assert _names(api, selected, "services") == _names(api, selected, "secrets") == []


EXPOSE = {"ssh-gateway.io/expose": "true"}
NAME_LABEL = "ssh-gateway.io/instance"
SSHD = {"name": "sshd", "image": "example.test/sshd:1"}
UP_BOUND = 180
"""Seconds an `up` of one instance may take here before it counts as held (one takes about 10)."""


def impersonating(admin: Path, user: str, groups: list[str], path: Path) -> Path:
    """The admin's kubeconfig acting as `user` in `groups`: every request is authorized as theirs."""
    config = yaml.safe_load(admin.read_text())
    for entry in config["users"]:
        entry["user"] |= {"as": user, "as-groups": groups}
    path.write_text(yaml.safe_dump(config))
    return path


def _up(stack: auto.Stack, log: Path) -> int:
    """`pulumi up` of the stack, its whole process tree killed if it outlasts `UP_BOUND`; its exit code."""
    up = start_up(stack, log)
    try:
        return up.wait(timeout=UP_BOUND)
    except subprocess.TimeoutExpired:
        kill_tree(up)
        raise AssertionError(f"the up was still running after {UP_BOUND} s: {log.read_text()[-2000:]}") from None


def _names(api: httpx.Client, namespace: str, kind: str) -> list[str]:
    items = api.get(f"/api/v1/namespaces/{namespace}/{kind}").raise_for_status().json()["items"]
    return sorted(i["metadata"]["name"] for i in items)
