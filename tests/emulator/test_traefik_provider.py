"""The internal API's Traefik HTTP-provider endpoint: no auth, its own port, and it follows the Integration API."""

from __future__ import annotations

import httpx
import pytest

from pangolin_emulator.harness import EmulatorHandle

from .conftest import api, create_raw, next_port

pytestmark = pytest.mark.provider


def test_the_internal_port_serves_the_raw_resources_to_traefik_without_a_key(emu122: EmulatorHandle) -> None:
    port = next_port()
    with api(emu122) as client:
        rid = create_raw(client, emu122.org_id, "ssh-gateway/it/traefik-1", port)["resourceId"]
        first = client.put(f"/resource/{rid}/target", json={"siteId": emu122.site_id, "ip": "127.0.0.1", "port": 22})
        second = client.put(f"/resource/{rid}/target", json={"siteId": emu122.site_id, "ip": "127.0.0.2", "port": 22})
        assert first.status_code == second.status_code == 201
        name = f"{rid}-ssh-gateway-it-traefik-1"

        # No Authorization header at all; the body is the configuration itself, not the API's envelope.
        answer = httpx.get(emu122.traefik_config_url, timeout=10)
        assert answer.status_code == 200 and answer.headers["content-type"].startswith("application/json")
        tcp = answer.json()["tcp"]
        assert tcp["routers"][f"{name}-router"] == {
            "entryPoints": [f"tcp-{port}"],
            "service": f"{name}-service",
            "rule": "HostSNI(`*`)",
        }
        servers = tcp["services"][f"{name}-service"]["loadBalancer"]["servers"]
        assert servers == [{"address": "127.0.0.1:22"}, {"address": "127.0.0.2:22"}]
        assert emu122.url.split(":")[2] not in emu122.traefik_config_url  # a port of its own

        # A disabled target goes at once; a disabled resource takes its router and service with it.
        tid = first.json()["data"]["targetId"]
        disabled = client.post(f"/target/{tid}", json={"siteId": emu122.site_id, "ip": "127.0.0.1", "enabled": False})
        assert disabled.status_code == 200, disabled.text
        servers = emu122.traefik_config()["tcp"]["services"][f"{name}-service"]["loadBalancer"]["servers"]
        assert servers == [{"address": "127.0.0.2:22"}]
        assert client.post(f"/resource/{rid}", json={"enabled": False}).status_code == 200
        tcp = emu122.traefik_config().get("tcp", {"routers": {}, "services": {}})
        assert f"{name}-router" not in tcp["routers"] and f"{name}-service" not in tcp["services"]
        assert client.delete(f"/resource/{rid}").status_code == 200

    assert httpx.get(emu122.traefik_config_url.replace("traefik-config", "other"), timeout=10).status_code == 404
