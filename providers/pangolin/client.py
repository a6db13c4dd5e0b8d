"""A synchronous client for the routes of Pangolin's Integration API that raw TCP/UDP resources use.

The contract is docs/pangolin-api.md (1.10 to 1.22). The client speaks both
create dialects, follows both pagination schemes, decodes the `{data, success, error, message,
status}` envelope and maps errors onto `providers.pangolin.errors`.
"""

from __future__ import annotations

import functools
import ssl
import threading
import time
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any, Literal, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel, ValidationError

from .errors import (
    PangolinError,
    PangolinServerError,
    PangolinTransportError,
    PangolinUnreachable,
    PangolinValidationError,
    error_for_status,
    may_have_applied,
)
from .models import (
    Envelope,
    LegacyRawResourceCreate,
    Pagination,
    Protocol,
    RawResourceCreate,
    RawResourceUpdate,
    Resource,
    Target,
    TargetCreate,
    TargetUpdate,
)
from .policy import DEFAULT_POLICY, HttpPolicy

__all__ = ["Dialect", "PangolinClient"]

Dialect = Literal["auto", "mode", "legacy"]
"""Create-body dialect: 1.19+ `mode`, 1.10-1.18 `legacy` (`http`/`protocol`), or `auto`."""

# What `dialect="auto"` learned per base URL. Module-level so that the clients built per provider
# call (one per call, see provider.py) pay the 1.18 fallback once per process, not once per create.
_learned_dialects: dict[str, Literal["mode", "legacy"]] = {}
_learned_lock = threading.Lock()

# How 1.18 answers a `mode` body (docs/pangolin-api.md, Addendum 8).
_LEGACY_ONLY_MESSAGES = ("http field is required", 'Unrecognized key: "mode"')

_ModelT = TypeVar("_ModelT", bound=BaseModel)


@functools.cache
def _tls_context(*, trusted: bool) -> ssl.SSLContext:
    """One verifying TLS context per process: loading the CA bundle costs ~20 ms, and the provider builds
    a client inside every call (clients cannot be pickled with the provider). Untrusted: no roots, for an
    `http://` API, whose clients never do TLS; it still verifies, so a TLS connection would fail."""
    return httpx.create_ssl_context() if trusted else ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)


class PangolinClient:
    """Pangolin Integration API client over `httpx.Client`; use it as a context manager.

    Retries with jittered exponential backoff on connection errors, timeouts, resets, 408, 429
    (honouring `Retry-After`, capped) and 5xx, but only for idempotent calls: GET, DELETE and the
    absolute-value updates `POST /resource/{id}` and `POST /target/{id}`. A create (PUT) is sent again
    as is only when it provably did not reach the server (connect error) or was refused with 429.

    Creates are still safe to retry (`create_resource`, `create_target`): after a failure that leaves
    unknown whether Pangolin made the object (`errors.may_have_applied`: 5xx, timeout, reset), the client
    looks for it once - a resource by its name, a target among its resource's targets - and returns it if
    it exists; otherwise it waits the policy's backoff and sends the create again, up to the policy's
    retries. The happy path costs one write and no read.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        policy: HttpPolicy = DEFAULT_POLICY,
        page_size: int = 100,
        dialect: Dialect = "auto",
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._base_url = base_url.rstrip("/")
        self._api_key = api_key
        self._policy = policy
        self._page_size = page_size
        self._dialect: Dialect = dialect
        self._sleep = sleep
        self._http = httpx.Client(
            base_url=self._base_url,
            headers={"Authorization": f"Bearer {api_key}", "Accept": "application/json"},
            timeout=policy.timeout,
            transport=transport,
            verify=_tls_context(trusted=self._base_url.lower().startswith("https:")),
        )

    def __enter__(self) -> PangolinClient:
        return self

    def __exit__(
        self,
        _exc_type: type[BaseException] | None,
        _exc: BaseException | None,
        _tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    # --- resources ---------------------------------------------------------------------------

    def create_resource(self, org_id: str, *, name: str, protocol: Protocol, proxy_port: int) -> Resource:
        """Create a raw TCP/UDP resource listening on `proxy_port` (Pangolin never picks one).

        Safe to retry: after an ambiguous failure a resource of this exact name and protocol that exists
        (the lowest id, if several) is returned instead of a second one being made - with whatever port
        and `enabled` it has, which the caller reconciles.
        """
        return self._create_once(
            "PUT /org/{orgId}/resource",
            lambda: self._send_resource(org_id, name=name, protocol=protocol, proxy_port=proxy_port),
            lambda: next(iter(self.find_resources(org_id, name, protocol)), None),
        )

    def find_resources(self, org_id: str, name: str, protocol: Protocol) -> list[Resource]:
        """The org's raw resources of exactly this `name` and `protocol`, lowest id first.

        1.16+ searches with `query`; it is a case-insensitive substring match in which `%` and `_` are
        wildcards (docs/pangolin-api.md §2.6), so it finds a superset and names are compared here, exactly.
        SQLite folds only ASCII letters there while the query is lower-cased in full Unicode, so a name
        with other letters could be missed: such a name is looked up by listing the whole org. 1.15 and
        older ignore `query` and answer by limit/offset: the same call then pages through the whole org.
        """
        search = {"query": name} if name.isascii() else {}
        found = self._collect(
            "/org/{orgId}/resources", "resources", Resource, _page_params(self._page_size), {"orgId": org_id}, search
        )
        return sorted((r for r in found if r.name == name and r.raw_protocol == protocol), key=lambda r: r.resourceId)

    def _send_resource(self, org_id: str, *, name: str, protocol: Protocol, proxy_port: int) -> Resource:
        dialect = self._create_dialect()
        try:
            return self._put_resource(org_id, dialect, name=name, protocol=protocol, proxy_port=proxy_port)
        except PangolinValidationError as exc:
            legacy_server = any(text in (exc.server_message or "") for text in _LEGACY_ONLY_MESSAGES)
            if self._dialect != "auto" or dialect != "mode" or not legacy_server:
                raise
            # Pangolin rejected the body before creating anything, so sending it again is safe.
            with _learned_lock:
                _learned_dialects[self._base_url] = "legacy"
            return self._put_resource(org_id, "legacy", name=name, protocol=protocol, proxy_port=proxy_port)

    def get_resource(self, resource_id: int) -> Resource:
        """One resource, in either the 1.18 or the 1.19+ shape."""
        return self._fetch(Resource, "GET", "/resource/{resourceId}", path={"resourceId": resource_id})

    def list_all_resources(self, org_id: str) -> list[Resource]:
        """Every resource of the org, across all pages."""
        return self._collect(
            "/org/{orgId}/resources", "resources", Resource, _page_params(self._page_size), {"orgId": org_id}
        )

    def update_resource(
        self,
        resource_id: int,
        *,
        name: str | None = None,
        proxy_port: int | None = None,
        enabled: bool | None = None,
    ) -> Resource:
        """Set the given fields of a raw resource; the others are left alone."""
        body = RawResourceUpdate(name=name, proxyPort=proxy_port, enabled=enabled)
        return self._fetch(
            Resource,
            "POST",
            "/resource/{resourceId}",
            body=body,
            retry=True,
            path={"resourceId": resource_id},
        )

    def delete_resource(self, resource_id: int) -> None:
        """Delete a resource; its targets go with it. Raises PangolinNotFound if already gone."""
        self._call("DELETE", "/resource/{resourceId}", path={"resourceId": resource_id})

    # --- targets -----------------------------------------------------------------------------

    def create_target(self, resource_id: int, *, site_id: int, ip: str, port: int) -> Target:
        """Add a target (site, ip, port) to a resource.

        Safe to retry: after an ambiguous failure a target of the resource with exactly this site, ip and
        port (the lowest id, if several) is returned instead of a second one being made.
        """
        body = TargetCreate(siteId=site_id, ip=ip, port=port)

        def find() -> Target | None:
            same = [t for t in self.list_targets(resource_id) if (t.siteId, t.ip, t.port) == (site_id, ip, port)]
            return min(same, key=lambda t: t.targetId, default=None)

        return self._create_once(
            "PUT /resource/{resourceId}/target",
            lambda: self._fetch(
                Target, "PUT", "/resource/{resourceId}/target", body=body, path={"resourceId": resource_id}
            ),
            find,
        )

    def list_targets(self, resource_id: int) -> list[Target]:
        """Every target of a resource, across all pages."""
        return self._collect(
            "/resource/{resourceId}/targets",
            "targets",
            Target,
            _offset_params(self._page_size, 0),
            {"resourceId": resource_id},
        )

    def update_target(self, target_id: int, *, site_id: int, ip: str, port: int) -> Target:
        """Set a target's site, ip and port (Pangolin requires siteId and ip on every update)."""
        body = TargetUpdate(siteId=site_id, ip=ip, port=port)
        return self._fetch(Target, "POST", "/target/{targetId}", body=body, retry=True, path={"targetId": target_id})

    def delete_target(self, target_id: int) -> None:
        """Delete a target. Raises PangolinNotFound if already gone."""
        self._call("DELETE", "/target/{targetId}", path={"targetId": target_id})

    # --- plumbing ----------------------------------------------------------------------------

    def _create_once(self, call: str, send: Callable[[], _ModelT], find: Callable[[], _ModelT | None]) -> _ModelT:
        """`send` a create; after a failure that may have been applied, wait, `find` what it made, and
        return that or send again - so retrying never makes a twin, and at most `max_retries` resends."""
        attempt = 0
        while True:
            try:
                return send()
            except PangolinError as exc:
                if not may_have_applied(exc):
                    raise
                if attempt >= self._policy.max_retries:
                    raise exc.with_advice(
                        f"Sent {attempt + 1} times; each earlier failure was followed by a lookup that found nothing"
                    ) from exc
                failure = exc
            # Waiting before the lookup also gives a request that timed out on our side time to finish
            # on the server's, so the lookup sees what it made.
            self._sleep(self._policy.backoff(attempt))
            try:
                found = find()
            except PangolinError as lookup:
                raise failure.with_advice(
                    f"Looking up whether {call} was applied failed too ({lookup}), so it was not sent again"
                ) from lookup
            if found is not None:
                return found
            attempt += 1

    def _create_dialect(self) -> Literal["mode", "legacy"]:
        if self._dialect != "auto":
            return self._dialect
        with _learned_lock:
            return _learned_dialects.get(self._base_url, "mode")

    def _put_resource(
        self,
        org_id: str,
        dialect: Literal["mode", "legacy"],
        *,
        name: str,
        protocol: Protocol,
        proxy_port: int,
    ) -> Resource:
        body: BaseModel
        if dialect == "mode":
            body = RawResourceCreate(name=name, mode=protocol, proxyPort=proxy_port)
        else:
            body = LegacyRawResourceCreate(name=name, protocol=protocol, proxyPort=proxy_port)
        return self._fetch(Resource, "PUT", "/org/{orgId}/resource", body=body, path={"orgId": org_id})

    def _collect(
        self,
        route: str,
        key: str,
        model: type[_ModelT],
        params: dict[str, int],
        path: Mapping[str, str | int],
        search: Mapping[str, str] | None = None,
    ) -> list[_ModelT]:
        """All items of a list route, following whichever pagination scheme the answer reports.

        1.16+ answers `{total, page, pageSize}`: ask for the next page until `total` is reached.
        1.15 and older answer `{total, limit, offset}` and ignore page params: continue by offset.
        Only keys the route knows are ever sent: 1.20+ rejects unknown query keys with 400. `search`
        (e.g. `query`) goes with every page.
        """
        call = f"GET {route}"
        items: list[_ModelT] = []
        while True:
            data = self._call("GET", route, params={**params, **(search or {})}, path=path)
            if not isinstance(data, Mapping) or not isinstance(data.get(key), list):
                raise PangolinServerError(f"Pangolin {call} answered without a `{key}` list", call=call, status=200)
            batch = [_validate(model, item, call) for item in data[key]]
            items.extend(batch)
            if data.get("pagination") is None:
                return items
            page = _validate(Pagination, data["pagination"], call)
            if not batch or len(items) >= page.total:
                return items
            if page.page is not None and page.pageSize is not None:
                if page.page != params.get("page"):
                    raise PangolinServerError(
                        f"Pangolin {call} ignored page={params.get('page')} (answered page {page.page})",
                        call=call,
                        status=200,
                    )
                params = _page_params(page.pageSize, page.page + 1)
            elif page.limit is not None and page.offset is not None:
                if "offset" in params and page.offset != params["offset"]:
                    raise PangolinServerError(
                        f"Pangolin {call} ignored offset={params['offset']} (answered {page.offset})",
                        call=call,
                        status=200,
                    )
                params = _offset_params(page.limit, page.offset + len(batch))
            else:
                raise PangolinServerError(
                    f"Pangolin {call} answered an unknown pagination scheme", call=call, status=200
                )

    def _fetch(
        self,
        model: type[_ModelT],
        method: Literal["GET", "PUT", "POST"],
        route: str,
        *,
        body: BaseModel | None = None,
        retry: bool | None = None,
        path: Mapping[str, str | int] | None = None,
    ) -> _ModelT:
        """`_call`, then the answer's `data` as a `model`."""
        data = self._call(method, route, body=body, retry=retry, path=path)
        return _validate(model, data, f"{method} {route}")

    def _call(
        self,
        method: Literal["GET", "PUT", "POST", "DELETE"],
        route: str,
        *,
        params: Mapping[str, int | str] | None = None,
        body: BaseModel | None = None,
        retry: bool | None = None,
        path: Mapping[str, str | int] | None = None,
    ) -> Any:
        """Send one request, retrying what is safe to retry, and return the envelope's `data`.

        `retry` marks a POST as idempotent; GET and DELETE always are, PUT never is.
        """
        call = f"{method} {route}"
        url = route.format(**{name: quote(str(value), safe="") for name, value in (path or {}).items()})
        idempotent = retry if retry is not None else method in ("GET", "DELETE")
        content = body.model_dump_json(exclude_none=True) if body is not None else None
        # Without this header Pangolin answers 500 on create (docs/pangolin-api.md §1.4).
        headers = {"Content-Type": "application/json"} if body is not None else None
        attempt = 0
        while True:
            retry_after: float | None = None
            cause: httpx.TransportError | None = None
            try:
                response = self._http.request(method, url, params=params, content=content, headers=headers)
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
                # The request never reached the server: safe to send again, whatever it is.
                error: PangolinError = PangolinUnreachable(
                    f"Pangolin {call}: cannot connect to {self._base_url} ({type(exc).__name__})", call=call
                )
                cause, may_retry = exc, True
            except httpx.TransportError as exc:
                # Sent, but no answer (timeout, reset): the server may have acted on it.
                error = PangolinTransportError(
                    f"Pangolin {call}: no answer from {self._base_url} ({type(exc).__name__})", call=call
                )
                cause, may_retry = exc, idempotent
            else:
                if response.is_success:
                    return self._decode(call, response)
                status = response.status_code
                error = error_for_status(call, status, self._server_message(response))
                may_retry = status == 429 or (idempotent and (status == 408 or status >= 500))
                if status == 429:
                    retry_after = self._policy.retry_after(response.headers.get("Retry-After"))
            if not may_retry or attempt >= self._policy.max_retries:
                raise error from cause
            self._sleep(retry_after if retry_after is not None else self._policy.backoff(attempt))
            attempt += 1

    def _decode(self, call: str, response: httpx.Response) -> Any:
        try:
            envelope = Envelope.model_validate(response.json())
        except (ValueError, ValidationError):
            raise PangolinServerError(
                f"Pangolin {call} answered {response.status_code} without a JSON envelope",
                call=call,
                status=response.status_code,
            ) from None
        return envelope.data

    def _server_message(self, response: httpx.Response) -> str | None:
        try:
            message = Envelope.model_validate(response.json()).message
        except (ValueError, ValidationError):
            # e.g. Express's HTML 404 for an unknown route
            message = response.text.strip()[:200] or None
        if message and self._api_key:
            message = message.replace(self._api_key, "<redacted>")
        return message


def _page_params(page_size: int, page: int = 1) -> dict[str, int]:
    return {"page": page, "pageSize": page_size}


def _offset_params(limit: int, offset: int) -> dict[str, int]:
    return {"limit": limit, "offset": offset}


def _validate(model: type[_ModelT], data: Any, call: str) -> _ModelT:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise PangolinServerError(
            f"Pangolin {call} answered an unexpected {model.__name__} ({exc.error_count()} problems: "
            + "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:3])
            + ")",
            call=call,
            status=200,
        ) from exc
