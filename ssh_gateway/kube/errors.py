"""The one exception of the cluster reader, and the wrapping of the client's errors into it."""

from __future__ import annotations

import json

from kubernetes.client.exceptions import ApiException

__all__ = ["KubeError", "api_problem"]


class KubeError(RuntimeError):
    """The cluster could not be read completely; the message is one line and carries no credential."""


def api_problem(exc: ApiException) -> str:
    """`403 Forbidden: services is forbidden: User "x" cannot list ...`: the status and the API server's own
    message (from its `Status` body). Never `str(exc)`, which includes every response header."""
    message = ""
    try:
        body = json.loads(exc.body) if exc.body else None
    except (json.JSONDecodeError, TypeError):
        body = None
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        message = f": {body['message']}"
    return f"{exc.status} {exc.reason or ''}".rstrip() + message
