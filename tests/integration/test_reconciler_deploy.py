"""deploy/reconciler/'s overlays against the real kube-apiserver: each is rendered with `kubectl kustomize` and
applied with `kubectl apply --server-side --dry-run=server` (strict field validation), as docs/reconciler.md has a
platform team do; and its RBAC grants the reconciler what it needs and nothing more (the API server's own
authorizer answers, through SubjectAccessReviews and a request made as the service account)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from ssh_gateway.local.control_plane import ControlPlane
from ssh_gateway.local.kubectl import OVERLAYS, apply, render

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

    @property
    def other_kind(self) -> str:
        return "services" if self.kind == "pods" else "pods"


OVERLAY_CASES = [
    Overlay("from-pods", "pods", ("gpu-users",)),
    Overlay("from-services", "services", ("team-a", "team-b")),
]

# (verbs, resource, where, API group). A resource KIND is the overlay's selected kind, OTHER_KIND the other one;
# where is `selected` (each selected namespace), `status`, `default` (a namespace no stack selects) or `cluster`.
GRANTED = [
    ("get list watch", "KIND", "selected", ""),
    ("get create update patch delete", "secrets", "selected", ""),  # host keys, by name
    ("create patch", "events", "selected", EVENTS),  # on the pods or Services it acts on
    ("get list create update patch delete", "configmaps", "status", ""),  # the status ConfigMaps
    ("get create update", "leases", "status", LEASE),  # a Lease per stack
    ("get", "pods", "status", ""),  # whether the replica whose Lease expired is gone
]
GRANTED_FROM_PODS = [("get create update patch delete", "services", "selected", "")]  # the ssh-<instance> Services
FORBIDDEN = [
    ("list", "KIND", "status", ""),  # only the selected namespaces
    ("list", "KIND", "default", ""),
    ("list", "KIND", "cluster", ""),
    ("create patch delete", "KIND", "selected", ""),  # the selected kind is read, never written
    ("list", "OTHER_KIND", "selected", ""),
    ("list watch", "secrets", "selected", ""),  # the Secrets it makes, by name; never a listing of every Secret
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

Attributes = tuple[str, str, str | None, str]


def expand(rows: list[tuple[str, str, str, str]], overlay: Overlay, renamed: Mapping[str, str]) -> list[Attributes]:
    """Each row as (verb, resource, namespace, group) per verb and namespace, in the test's namespace names."""
    resources = {"KIND": overlay.kind, "OTHER_KIND": overlay.other_kind}
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
    rbac = [d for d in rendered(overlay, renamed) if d["kind"] in ("ServiceAccount", "Role", "RoleBinding")]
    apply(rbac, kube.kubeconfig, dry_run=False)
    status = renamed[STATUS_NS]
    user = f"system:serviceaccount:{status}:{SERVICE_ACCOUNT}"
    groups = ["system:serviceaccounts", f"system:serviceaccounts:{status}", "system:authenticated"]

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
    forbidden = expand(FORBIDDEN, overlay, renamed)
    assert [g for g in granted if not allowed(*g)] == []
    assert [f for f in forbidden if allowed(*f)] == []

    # And a real request as the service account: the API server answers 403 outside what it grants.
    as_reconciler = {"Impersonate-User": user, "Impersonate-Group": groups[0]}
    selected = renamed[overlay.namespaces[-1]]
    assert api.get(f"/api/v1/namespaces/{selected}/{overlay.kind}", headers=as_reconciler).status_code == 200
    assert api.get(f"/api/v1/namespaces/{status}/{overlay.kind}", headers=as_reconciler).status_code == 403
    assert api.get(f"/api/v1/namespaces/{selected}/secrets", headers=as_reconciler).status_code == 403
