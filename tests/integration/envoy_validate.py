"""`envoy --mode validate` on a gateway config the tests built: Envoy's own verdict on what istiod would push.

A test tool, so it lives with the tests: the rig (`ssh_gateway/local/envoy.py`) runs Envoy, this only asks it.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ssh_gateway.core.connect import HCM_FILTER
from ssh_gateway.local.envoy import envoy_binary, gateway_bootstrap
from ssh_gateway.plumbing.loopback import free_port

__all__ = ["envoy_validate"]


def _inline_routes(listener: Mapping[str, Any], route_configuration: Mapping[str, Any]) -> dict[str, Any]:
    """The listener with its RDS replaced by the route configuration RDS would deliver: what `envoy --mode
    validate` can check (it does not load RDS)."""
    copy: dict[str, Any] = json.loads(json.dumps(listener))
    for chain in copy.get("filter_chains", []):
        for network_filter in chain.get("filters", []):
            hcm = network_filter.get("typed_config", {})
            if network_filter.get("name") == HCM_FILTER and "rds" in hcm:
                del hcm["rds"]
                hcm["route_config"] = dict(route_configuration)
    return copy


def envoy_validate(
    listener: Mapping[str, Any],
    route_configuration: Mapping[str, Any],
    clusters: Mapping[str, int],
    workdir: Path,
) -> subprocess.CompletedProcess[str]:
    """`envoy --mode validate` on the gateway as it would be once RDS delivered `route_configuration`: Envoy's
    own verdict (return code 0, or its error)."""
    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / "validate.json"
    listener = _inline_routes(listener, route_configuration)
    config.write_text(json.dumps(gateway_bootstrap(listener, clusters, free_port(), workdir / "v.log")))
    argv = [str(envoy_binary()), "--mode", "validate", "-c", str(config), "-l", "critical", "--disable-hot-restart"]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
