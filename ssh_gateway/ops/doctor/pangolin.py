"""Pangolin's side of an instance: its resource and target exist, are enabled and match the stack."""

from __future__ import annotations

import httpx

from ssh_gateway.core.outputs import Via
from ssh_gateway.ops.shared.pangolin_api import (
    PangolinAuthError,
    PangolinError,
    PangolinNotFound,
    PangolinTransportError,
    no_retry_client,
)

from .model import Check, Endpoint

__all__ = ["check_pangolin"]

_REFRESH = "run `pulumi up --refresh` to put back what the stack declares"


def check_pangolin(
    endpoint: Endpoint,
    api_url: str,
    api_key: str | None,
    timeout: float,
    *,
    transport: httpx.BaseTransport | None = None,
) -> Check:
    """One GET of the resource and one of its targets, each within `timeout`, no retries (the doctor must not
    wait out a backoff). Messages never contain the key: the client builds them from the route and status.
    `transport` is a test seam (httpx.MockTransport)."""
    if endpoint.via is Via.DIRECT:
        return Check("pangolin", "skip", "the CONNECT entry is the gateway's own address (via: direct)")
    if endpoint.resource_id is None:
        return Check("pangolin", "fail", "the stack has no Pangolin resource for this instance", "run pulumi up")
    if not api_key:
        return Check(
            "pangolin",
            "warn",
            "not checked: no API key (the stack secret pangolin:apiKey or PANGOLIN_API_KEY)",
        )
    rid = endpoint.resource_id
    try:
        with no_retry_client(api_url, api_key, timeout, transport=transport) as client:
            try:
                resource = client.get_resource(rid)
            except PangolinNotFound:
                return Check(
                    "pangolin",
                    "fail",
                    f"Pangolin resource {rid} does not exist (deleted outside Pulumi)",
                    "run `pulumi refresh` to drop it from the stack, then `pulumi up` to create it again",
                )
            targets = client.list_targets(rid)
    except PangolinAuthError as exc:
        return Check("pangolin", "warn", f"not checked: the API key was refused ({exc.status or exc})")
    except PangolinTransportError as exc:
        return Check("pangolin", "warn", f"not checked: cannot reach the Pangolin API at {api_url} ({exc})")
    except PangolinError as exc:
        return Check("pangolin", "warn", f"not checked: {exc}")

    problems = []
    if not resource.enabled:
        problems.append(f"Pangolin resource {rid} is disabled")
    if resource.raw_protocol != "tcp":
        problems.append(f"Pangolin resource {rid} is not a raw TCP resource (mode {resource.mode!r})")
    if resource.proxyPort != endpoint.port:
        problems.append(f"Pangolin resource {rid} listens on {resource.proxyPort}, the stack says {endpoint.port}")
    if resource.name != endpoint.expected_name:
        problems.append(f"Pangolin resource {rid} is named {resource.name!r}, not {endpoint.expected_name!r}")
    enabled = [t for t in targets if t.enabled]
    if not targets:
        problems.append(f"Pangolin resource {rid} has no target: nothing is behind port {endpoint.port}")
    elif not enabled:
        ids = ", ".join(str(t.targetId) for t in targets)
        problems.append(f"the target(s) {ids} of Pangolin resource {rid} are disabled")
    if problems:
        return Check("pangolin", "fail", "; ".join(problems), f"changed outside Pulumi: {_REFRESH}")
    upstreams = ", ".join(f"{t.ip}:{t.port} (site {t.siteId})" for t in enabled)
    return Check("pangolin", "ok", f"resource {rid} tcp :{resource.proxyPort} -> {upstreams}, enabled")
