"""Errors raised when talking to Pangolin's Integration API.

    PangolinError                   base: `call`, `status`, `server_message`
    ├── PangolinTransportError      no answer: connection reset, timeout (the request may have been applied)
    │   └── PangolinUnreachable     no connection at all: the request never reached the server
    ├── PangolinAuthError           401 / 403, or no API key configured at all
    ├── PangolinNotFound            404
    ├── PangolinValidationError     400
    ├── PangolinConflict            409
    └── PangolinServerError         5xx, or an answer the client cannot decode

`call` names the route as a template, e.g. ``"PUT /org/{orgId}/resource"``; `status` is the HTTP
status (None when no answer caused the error: a transport failure, a missing key, a refused
adoption); `server_message` is Pangolin's own `message`. Messages
never contain the API key or the Authorization header: the client builds them only from these
three fields.

`may_have_applied` says whether a failed write may have happened anyway: what decides that a create is
looked up before it is sent again.
"""

from __future__ import annotations

__all__ = [
    "PangolinAuthError",
    "PangolinConflict",
    "PangolinError",
    "PangolinNotFound",
    "PangolinServerError",
    "PangolinTransportError",
    "PangolinUnreachable",
    "PangolinValidationError",
    "error_for_status",
    "may_have_applied",
]

# Pangolin answers these when `flags.allow_raw_resources` is unset or false (docs/pangolin-api.md §2.4):
# the code treats "unset" as false although the docs claim the default is true.
_RAW_FLAG_MESSAGES = ("Raw resources are not allowed", "Cannot update proxyPort")
_RAW_FLAG_HINT = (
    "Raw TCP/UDP resources are disabled on this Pangolin server: set `flags.allow_raw_resources: true` "
    "in the Pangolin server's config.yml and restart Pangolin."
)


class PangolinError(Exception):
    """Base class of every error the Pangolin client and provider raise."""

    call: str
    """The route, e.g. ``"PUT /org/{orgId}/resource"``."""

    status: int | None
    """The HTTP status, or None when the error did not come from an answer."""

    server_message: str | None
    """Pangolin's own `message`, if it sent one."""

    def __init__(
        self,
        message: str,
        *,
        call: str,
        status: int | None = None,
        server_message: str | None = None,
    ) -> None:
        super().__init__(message)
        self.call = call
        self.status = status
        self.server_message = server_message

    def with_advice(self, advice: str) -> PangolinError:
        """The same error, of the same class, with what the user can do about it appended."""
        return type(self)(f"{self}. {advice}", call=self.call, status=self.status, server_message=self.server_message)


class PangolinTransportError(PangolinError):
    """No answer: the connection failed, was reset, or timed out."""


class PangolinUnreachable(PangolinTransportError):
    """The connection could not be opened (refused, connect timeout): the request never reached Pangolin."""


class PangolinAuthError(PangolinError):
    """The key is missing, invalid, or lacks access or a permission (401/403)."""


class PangolinNotFound(PangolinError):
    """The resource, target, site or domain does not exist (404)."""


class PangolinValidationError(PangolinError):
    """Pangolin rejected the request body or query (400)."""


class PangolinConflict(PangolinError):
    """The request clashes with existing state (409)."""


class PangolinServerError(PangolinError):
    """Pangolin failed (5xx) or answered something the client cannot decode."""


_BY_STATUS: dict[int, type[PangolinError]] = {
    400: PangolinValidationError,
    401: PangolinAuthError,
    403: PangolinAuthError,
    404: PangolinNotFound,
    409: PangolinConflict,
}


def error_for_status(call: str, status: int, server_message: str | None) -> PangolinError:
    """The exception for an error answer, with a message naming the call and Pangolin's message."""
    cls = _BY_STATUS.get(status, PangolinServerError)
    message = f"Pangolin {call} answered {status}"
    if server_message:
        message += f": {server_message}"
    if server_message and any(text in server_message for text in _RAW_FLAG_MESSAGES):
        message += f". {_RAW_FLAG_HINT}"
    return cls(message, call=call, status=status, server_message=server_message)


def may_have_applied(error: PangolinError) -> bool:
    """Whether the write that failed with `error` may have been applied by Pangolin all the same.

    True for an answer lost after the request was sent (timeout, reset), a 5xx (the handler may have
    committed before failing), and a success status whose body could not be read. False for what
    Pangolin provably refused or never received: a connect error and every 4xx (429 included).
    """
    if isinstance(error, PangolinUnreachable):
        return False
    if isinstance(error, PangolinTransportError):
        return True
    status = error.status
    return isinstance(error, PangolinServerError) and status is not None and (status >= 500 or 200 <= status < 300)
