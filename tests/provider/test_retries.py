"""Retry and backoff timing of `PangolinClient`, with scripted answers (`httpx.MockTransport`).

Everything else in this directory runs against the emulator; these pin down which calls are
retried, how long the client sleeps, and when it gives up, without waiting for real time.
"""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from providers.pangolin import (
    PangolinClient,
    PangolinServerError,
    PangolinTransportError,
    PangolinValidationError,
)
from providers.pangolin.policy import HttpPolicy

pytestmark = pytest.mark.provider

_OK_RESOURCE = {"resourceId": 7, "niceId": "brave-otter", "name": "pg", "mode": "tcp", "proxyPort": 40001}


def _answer(status: int, data: object = None, headers: dict[str, str] | None = None) -> httpx.Response:
    body = {"data": data, "success": status < 400, "error": status >= 400, "message": "m", "status": status}
    return httpx.Response(status, json=body, headers=headers)


Step = httpx.Response | type[httpx.TransportError]


def _scripted(steps: list[Step]) -> tuple[PangolinClient, list[httpx.Request], list[float]]:
    """A client whose transport plays `steps` in order, recording requests and sleeps."""
    requests: list[httpx.Request] = []
    sleeps: list[float] = []

    def handler(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        step = steps.pop(0)
        if isinstance(step, httpx.Response):
            return step
        raise step("scripted", request=request)

    client = PangolinClient(
        "http://pangolin.test/v1",
        "abcdefghijklmno.secretsecret",
        policy=HttpPolicy(max_retries=3, backoff_base=1.0, backoff_max=8.0, retry_after_max=5.0),
        transport=httpx.MockTransport(handler),
        sleep=sleeps.append,
    )
    return client, requests, sleeps


def test_get_retries_5xx_with_growing_jittered_backoff() -> None:
    client, requests, sleeps = _scripted([_answer(500), _answer(503), _answer(502), _answer(200, _OK_RESOURCE)])
    assert client.get_resource(7).resourceId == 7
    assert len(requests) == 4
    # equal jitter: attempt n sleeps between half and all of base * 2**n
    for attempt, slept in enumerate(sleeps):
        assert 2.0**attempt / 2 <= slept <= 2.0**attempt


def test_429_honours_retry_after_capped_even_for_a_create() -> None:
    client, requests, sleeps = _scripted(
        [
            _answer(429, headers={"Retry-After": "2"}),
            _answer(429, headers={"Retry-After": "120"}),
            _answer(201, _OK_RESOURCE),
        ]
    )
    client.create_resource("acme", name="pg", protocol="tcp", proxy_port=40001)
    assert [r.method for r in requests] == ["PUT", "PUT", "PUT"]
    assert sleeps == [2.0, 5.0]


@pytest.mark.parametrize("failure", [_answer(500), _answer(408), httpx.ReadTimeout, httpx.RemoteProtocolError], ids=str)
def test_a_create_that_may_have_reached_the_server_is_not_retried(failure: Step) -> None:
    client, requests, sleeps = _scripted([failure])
    with pytest.raises((PangolinServerError, PangolinTransportError)):
        client.create_resource("acme", name="pg", protocol="tcp", proxy_port=40001)
    assert len(requests) == 1
    assert sleeps == []


@pytest.mark.parametrize("failure", [httpx.ConnectError, httpx.ConnectTimeout])
def test_a_create_that_never_connected_is_retried(failure: type[httpx.TransportError]) -> None:
    client, requests, _ = _scripted([failure, _answer(201, _OK_RESOURCE)])
    assert client.create_resource("acme", name="pg", protocol="tcp", proxy_port=40001).resourceId == 7
    assert len(requests) == 2


_TARGET = {"targetId": 3, "siteId": 1, "ip": "10.0.0.1", "port": 22}


@pytest.mark.parametrize(
    ("call", "method", "answer"),
    [
        (lambda c: c.update_resource(7, proxy_port=40002), "POST", _OK_RESOURCE),
        (lambda c: c.update_target(3, site_id=1, ip="10.0.0.1", port=22), "POST", _TARGET),
        (lambda c: c.delete_resource(7), "DELETE", None),
    ],
    ids=["update-resource", "update-target", "delete"],
)
def test_absolute_updates_and_deletes_are_retried(
    call: Callable[[PangolinClient], object], method: str, answer: object
) -> None:
    client, requests, _ = _scripted([httpx.ReadTimeout, _answer(503), _answer(200, answer)])
    call(client)
    assert [r.method for r in requests] == [method] * 3


def test_an_unexpected_answer_is_a_server_error() -> None:
    client, _, _ = _scripted([_answer(200, {"resourceId": "seven"})])
    with pytest.raises(PangolinServerError, match="unexpected Resource"):
        client.get_resource(7)


def test_gives_up_after_max_retries_with_the_last_error() -> None:
    client, requests, sleeps = _scripted([_answer(500)] * 4)
    with pytest.raises(PangolinServerError) as raised:
        client.get_resource(7)
    assert raised.value.status == 500
    assert raised.value.call == "GET /resource/{resourceId}"
    assert len(requests) == 4
    assert len(sleeps) == 3


def test_400_is_never_retried() -> None:
    client, requests, _ = _scripted([_answer(400)])
    with pytest.raises(PangolinValidationError):
        client.get_resource(7)
    assert len(requests) == 1
