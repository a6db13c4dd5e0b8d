"""The cluster reader (ssh_gateway/kube) against the real kube-apiserver: a listing of many pages is complete,
a forbidden one is one `KubeError` (never a shorter list), and the status ConfigMaps are read as memory."""

from __future__ import annotations

from typing import Any

import pytest

from ssh_gateway.core.names import MANAGED_BY, MANAGED_BY_LABEL, STACK_LABEL, DiscoverFrom
from ssh_gateway.kube import KubeError, api_client, list_selected, read_status, read_statuses
from ssh_gateway.kube import listing as listing_module
from ssh_gateway.local.control_plane import RESTRICTED_USER, ControlPlane

pytestmark = pytest.mark.integration

SELECTOR = {"ssh-gateway.io/expose": "true"}


def create(kube: ControlPlane, path: str, body: dict[str, Any]) -> None:
    with kube.client() as api:
        api.post(path, json=body).raise_for_status()


def service(namespace: str, name: str, labels: dict[str, str], node_port: int | None = None) -> dict[str, Any]:
    port: dict[str, Any] = {"name": "ssh", "port": 22, "targetPort": 22}
    spec: dict[str, Any] = {"type": "ClusterIP", "selector": {"app": name}, "ports": [port]}
    if node_port is not None:
        spec["type"] = "NodePort"
        port["nodePort"] = node_port
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "labels": labels}, "spec": spec}


def grant(kube: ControlPlane, namespace: str, resources: list[str]) -> None:
    """A Role letting `RESTRICTED_USER` get and list `resources` in `namespace`, and its binding."""
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": "reader"},
        "rules": [{"apiGroups": [""], "resources": resources, "verbs": ["get", "list"]}],
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "reader"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": RESTRICTED_USER}],
    }
    create(kube, f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/roles", role)
    create(kube, f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/rolebindings", binding)


def test_a_listing_of_many_pages_is_complete(
    kube: ControlPlane, kube_namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for index in range(5):
        labels = {**SELECTOR, "ssh-gateway.io/instance": f"u{index}"}
        body = service(kube_namespace, f"ssh-u{index}", labels, 30100 + index)
        create(kube, f"/api/v1/namespaces/{kube_namespace}/services", body)
    create(kube, f"/api/v1/namespaces/{kube_namespace}/services", service(kube_namespace, "other", {"app": "x"}))
    monkeypatch.setattr(listing_module, "PAGE_SIZE", 2)  # three pages
    api = api_client(str(kube.kubeconfig), None)
    found = list_selected(api, DiscoverFrom.SERVICES, [kube_namespace], SELECTOR)
    assert sorted(o.name for o in found.objects) == [f"ssh-u{i}" for i in range(5)]
    first = next(o for o in found.objects if o.name == "ssh-u0")
    assert first.ref == f"service {kube_namespace}/ssh-u0"
    assert first.service_type == "NodePort"
    assert [(p.port, p.node_port) for p in first.ports] == [(22, 30100)]
    assert first.labels["ssh-gateway.io/instance"] == "u0" and first.uid
    assert found.resource_versions[kube_namespace]


def test_a_forbidden_listing_is_an_error_not_an_empty_list(kube: ControlPlane, kube_namespace: str) -> None:
    create(kube, f"/api/v1/namespaces/{kube_namespace}/services", service(kube_namespace, "ssh-a", SELECTOR))
    api = api_client(str(kube.restricted_kubeconfig()), None)
    with pytest.raises(KubeError) as info:
        list_selected(api, DiscoverFrom.SERVICES, [kube_namespace], SELECTOR)
    assert str(info.value).startswith(f"cannot list services in namespace {kube_namespace} with labels ")
    assert f'403 Forbidden: services is forbidden: User "{RESTRICTED_USER}" cannot list' in str(info.value)
    # Allowed to list Services but not to read ConfigMaps: the memory is unreadable, which is not "none".
    grant(kube, kube_namespace, ["services"])
    assert len(list_selected(api, DiscoverFrom.SERVICES, [kube_namespace], SELECTOR).objects) == 1
    with pytest.raises(KubeError, match=r"cannot read the status ConfigMap .*: 403 Forbidden: configmaps"):
        read_status(api, kube_namespace, "ssh-gateway-status-x")


def test_status_config_maps_are_read_as_memory(kube: ControlPlane, kube_namespace: str) -> None:
    api = api_client(str(kube.kubeconfig), None)
    assert read_status(api, kube_namespace, "ssh-gateway-status-a") is None  # no memory yet: a complete answer
    for stack in ("a", "b"):
        labels = {MANAGED_BY_LABEL: MANAGED_BY, STACK_LABEL: f"ssh-gateway.{stack}"}
        body = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": f"ssh-gateway-status-{stack}", "labels": labels},
            "data": {"selection.json": f'{{"stack": "{stack}"}}'},
        }
        create(kube, f"/api/v1/namespaces/{kube_namespace}/configmaps", body)
    create(
        kube,
        f"/api/v1/namespaces/{kube_namespace}/configmaps",
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "unrelated"}, "data": {"x": "y"}},
    )
    status = read_status(api, kube_namespace, "ssh-gateway-status-a")
    assert status is not None and status.stack == "ssh-gateway.a"
    assert status.data == {"selection.json": '{"stack": "a"}'}
    assert sorted(s.stack for s in read_statuses(api, kube_namespace)) == ["ssh-gateway.a", "ssh-gateway.b"]
