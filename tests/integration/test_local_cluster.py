"""`ssh-gateway local-cluster start` (ssh_gateway/local/local_cluster.py): the local cluster it starts
serves Istio's CRDs, so a connect stack (kind istio) can create its EnvoyFilters and Gateway there. Run
in-process on free ports and a temporary directory, so a local cluster of the user's (fixed ports, under
.pulumi-state/) is left alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from ssh_gateway.local import local_cluster
from ssh_gateway.local.control_plane import ControlPlane
from ssh_gateway.plumbing.loopback import free_port

pytestmark = pytest.mark.integration

SERVED = {"/apis/networking.istio.io/v1alpha3": "EnvoyFilter", "/apis/networking.istio.io/v1": "Gateway"}
"""What a connect stack creates, at the apiVersions it uses (ssh_gateway/core/connect.py)."""


def test_local_cluster_start_installs_istio_crds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(local_cluster, "CLUSTER_ROOT", tmp_path / "local-cluster")
    monkeypatch.setattr(local_cluster, "CLUSTER_STATE", tmp_path / "local-cluster" / "state.json")
    ports = {"api_port": free_port(), "etcd_port": free_port(), "etcd_peer_port": free_port()}
    monkeypatch.setattr(local_cluster, "CLUSTER_PORTS", ports)
    assert local_cluster.run("start") == 0
    try:
        assert "Istio's CRDs:" in capsys.readouterr().out
        plane = ControlPlane.from_json((tmp_path / "local-cluster" / "state.json").read_text())
        with plane.client() as api:
            for group_version, kind in SERVED.items():
                response = api.get(group_version)
                response.raise_for_status()
                assert kind in {r["kind"] for r in response.json()["resources"]}, group_version
    finally:
        assert local_cluster.run("stop") == 0
