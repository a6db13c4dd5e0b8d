"""deploy/reconciler/ against the real kube-apiserver: every manifest passes a server-side dry run with strict field
validation, and its RBAC grants the reconciler what it needs and nothing more (the API server's own authorizer
answers, through SubjectAccessReviews and a request made as the service account)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from ssh_gateway.local.control_plane import ControlPlane

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "reconciler"
STATUS_NS, USERS_NS = "ssh-gateway", "gpu-users"
SERVICE_ACCOUNT = "ssh-gateway-reconciler"

# Where each kind of the manifests is created (group/version path, plural, namespaced).
PATHS = {
    "Namespace": ("/api/v1", "namespaces", False),
    "ServiceAccount": ("/api/v1", "serviceaccounts", True),
    "Role": ("/apis/rbac.authorization.k8s.io/v1", "roles", True),
    "RoleBinding": ("/apis/rbac.authorization.k8s.io/v1", "rolebindings", True),
    "Deployment": ("/apis/apps/v1", "deployments", True),
}


def manifests(renamed: Mapping[str, str]) -> list[dict[str, Any]]:
    """Every object of deploy/reconciler/*.yaml, its namespaces renamed (a fresh set per test)."""
    docs = [d for f in sorted(DEPLOY.glob("*.yaml")) for d in yaml.safe_load_all(f.read_text()) if d]
    for doc in docs:
        meta = doc["metadata"]
        if doc["kind"] == "Namespace":
            meta["name"] = renamed[meta["name"]]
        else:
            meta["namespace"] = renamed[meta["namespace"]]
        for subject in doc.get("subjects", ()):
            subject["namespace"] = renamed[subject["namespace"]]
    return docs


def create(api: httpx.Client, doc: Mapping[str, Any], *, dry_run: bool) -> httpx.Response:
    base, plural, namespaced = PATHS[doc["kind"]]
    where = f"/namespaces/{doc['metadata']['namespace']}" if namespaced else ""
    params = {"fieldValidation": "Strict", **({"dryRun": "All"} if dry_run else {})}
    return api.post(f"{base}{where}/{plural}", json=doc, params=params)


@pytest.fixture
def renamed() -> dict[str, str]:
    return {STATUS_NS: f"it-{uuid.uuid4().hex[:8]}", USERS_NS: f"it-{uuid.uuid4().hex[:8]}"}


@pytest.fixture
def api(kube: ControlPlane) -> Iterator[httpx.Client]:
    with kube.client() as client:
        yield client


def test_every_manifest_passes_a_server_side_dry_run(api: httpx.Client, renamed: dict[str, str]) -> None:
    docs = manifests(renamed)
    assert sorted({d["kind"] for d in docs}) == sorted(PATHS)
    namespaces = [d for d in docs if d["kind"] == "Namespace"]
    for doc in namespaces:  # before it exists: a dry run of its create
        answer = create(api, doc, dry_run=True)
        assert answer.status_code == 201, answer.text
    for name in renamed.values():
        api.post("/api/v1/namespaces", json={"metadata": {"name": name}}).raise_for_status()
    for doc in docs:
        if doc["kind"] == "Namespace":
            continue
        answer = create(api, doc, dry_run=True)
        assert answer.status_code == 201, f"{doc['kind']} {doc['metadata']['name']}: {answer.text}"
        assert answer.json()["metadata"]["name"] == doc["metadata"]["name"]
        assert not answer.headers.get("Warning"), answer.headers.get("Warning")  # e.g. a deprecated field
    # Nothing was made by the dry run.
    assert api.get(f"/apis/apps/v1/namespaces/{renamed[STATUS_NS]}/deployments").json()["items"] == []


def test_the_rbac_grants_what_the_reconciler_needs_and_forbids_the_rest(
    api: httpx.Client, renamed: dict[str, str]
) -> None:
    status, users = renamed[STATUS_NS], renamed[USERS_NS]
    for name in renamed.values():
        api.post("/api/v1/namespaces", json={"metadata": {"name": name}}).raise_for_status()
    for doc in manifests(renamed):
        if doc["kind"] in ("ServiceAccount", "Role", "RoleBinding"):
            create(api, doc, dry_run=False).raise_for_status()
    user = f"system:serviceaccount:{status}:{SERVICE_ACCOUNT}"
    groups = ["system:serviceaccounts", f"system:serviceaccounts:{status}", "system:authenticated"]

    def allowed(verb: str, resource: str, namespace: str | None, group: str = "") -> bool:
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

    lease = "coordination.k8s.io"
    granted = [
        ("list", "pods", users, ""),
        ("watch", "pods", users, ""),
        ("create", "secrets", users, ""),  # host keys
        ("patch", "secrets", users, ""),
        ("create", "services", users, ""),  # from: pods
        ("delete", "services", users, ""),
        ("get", "configmaps", status, ""),  # the status ConfigMap
        ("list", "configmaps", status, ""),  # other stacks' selections
        ("update", "configmaps", status, ""),
        ("get", "leases", status, lease),
        ("create", "leases", status, lease),
        ("update", "leases", status, lease),
        ("get", "pods", status, ""),  # whether the replica whose Lease expired is gone
    ]
    forbidden = [
        ("list", "pods", status, ""),  # only the selected namespaces
        ("list", "pods", "default", ""),
        ("list", "pods", None, ""),  # not cluster-wide
        ("create", "pods", users, ""),  # the selected kind is read, never written
        ("delete", "pods", users, ""),
        ("patch", "pods", users, ""),
        ("list", "secrets", users, ""),  # the Secrets it makes, by name; never a listing of every Secret
        ("list", "services", users, ""),  # from: pods: the Services it makes, by name
        ("get", "secrets", status, ""),
        ("create", "configmaps", users, ""),  # the status channel lives in the status namespace only
        ("update", "leases", users, lease),
        ("delete", "leases", status, lease),
        ("list", "namespaces", None, ""),
        ("list", "nodes", None, ""),
        ("create", "rolebindings", status, "rbac.authorization.k8s.io"),
        ("create", "deployments", status, "apps"),
    ]
    assert [g for g in granted if not allowed(*g)] == []
    assert [f for f in forbidden if allowed(*f)] == []

    # And a real request as the service account: the API server answers 403 outside what it grants.
    as_reconciler = {"Impersonate-User": user, "Impersonate-Group": groups[0]}
    assert api.get(f"/api/v1/namespaces/{users}/pods", headers=as_reconciler).status_code == 200
    assert api.get(f"/api/v1/namespaces/{status}/pods", headers=as_reconciler).status_code == 403
    assert api.get(f"/api/v1/namespaces/{users}/secrets", headers=as_reconciler).status_code == 403
