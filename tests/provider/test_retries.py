"""Retry and backoff timing of `PangolinClient`, with scripted answers (`httpx.MockTransport`).

Everything else in this directory runs against the emulator; these pin down which calls are
retried, how long the client sleeps, and when it gives up, without waiting for real time.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import httpx
import pytest

from providers.pangolin import (
    PangolinClient,
    PangolinError,
    PangolinServerError,
    PangolinValidationError,
)
from providers.pangolin.errors import PangolinUnreachable
from providers.pangolin.policy import HttpPolicy

pytestmark = pytest.mark.provider

_OK_RESOURCE = {"resourceId": 7, "niceId": "brave-otter", "name": "pg", "mode": "tcp", "proxyPort": 40001}
_TARGET = {"targetId": 3, "siteId": 1, "ip": "10.0.0.1", "port": 22}


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


def _listing(*resources: dict[str, object]) -> httpx.Response:
    return _answer(
        200, {"resources": list(resources), "pagination": {"total": len(resources), "page": 1, "pageSize": 100}}
    )


_LOST = [_answer(500), _answer(502), _answer(200, "not a resource"), httpx.ReadTimeout, httpx.RemoteProtocolError]


@pytest.mark.parametrize("failure", _LOST, ids=str)
def test_a_create_whose_answer_was_lost_is_looked_up_by_name_and_returned(failure: Step) -> None:
    # The search is a substring match: near namesakes come back too and must not be taken.
    namesakes = [
        {**_OK_RESOURCE, "resourceId": 5, "name": "pg-2"},
        {**_OK_RESOURCE, "resourceId": 6, "name": "PG"},
        {**_OK_RESOURCE, "resourceId": 4, "mode": "udp"},
    ]
    client, requests, sleeps = _scripted(
        [failure, _listing(*namesakes, _OK_RESOURCE, {**_OK_RESOURCE, "resourceId": 9})]
    )

    made = client.create_resource("acme", name="pg", protocol="tcp", proxy_port=40001)

    assert made.resourceId == 7  # the lowest id of the exact matches
    assert [(r.method, r.url.path) for r in requests] == [
        ("PUT", "/v1/org/acme/resource"),
        ("GET", "/v1/org/acme/resources"),
    ]
    assert dict(requests[1].url.params) == {"page": "1", "pageSize": "100", "query": "pg"}
    assert len(sleeps) == 1 and 0.5 <= sleeps[0] <= 1.0


def test_a_lost_create_that_made_nothing_is_sent_again_after_backoff() -> None:
    client, requests, sleeps = _scripted([httpx.ReadTimeout, _listing(), _answer(201, _OK_RESOURCE)])
    assert client.create_resource("acme", name="pg", protocol="tcp", proxy_port=40001).resourceId == 7
    assert [r.method for r in requests] == ["PUT", "GET", "PUT"]
    assert len(sleeps) == 1


def test_a_create_gives_up_after_max_retries_saying_so() -> None:
    steps: list[Step] = [_answer(500), _listing()] * 3
    client, requests, sleeps = _scripted([*steps, _answer(500)])
    with pytest.raises(PangolinServerError, match="Sent 4 times") as raised:
        client.create_resource("acme", name="pg", protocol="tcp", proxy_port=40001)
    assert raised.value.status == 500
    assert [r.method for r in requests] == ["PUT", "GET"] * 3 + ["PUT"]
    assert len(sleeps) == 3


@pytest.mark.parametrize("failure", [_answer(408), _answer(400), _answer(409)], ids=str)
def test_a_create_pangolin_refused_is_neither_looked_up_nor_retried(failure: Step) -> None:
    client, requests, sleeps = _scripted([failure])
    with pytest.raises(PangolinError):
        client.create_resource("acme", name="pg", protocol="tcp", proxy_port=40001)
    assert len(requests) == 1
    assert sleeps == []


def test_a_failed_lookup_is_not_followed_by_a_second_create() -> None:
    client, requests, _ = _scripted([_answer(500), _answer(400)])
    with pytest.raises(
        PangolinServerError, match=re.escape("Looking up whether PUT /org/{orgId}/resource was applied failed")
    ):
        client.create_resource("acme", name="pg", protocol="tcp", proxy_port=40001)
    assert [r.method for r in requests] == ["PUT", "GET"]


def test_a_name_sqlite_cannot_fold_is_looked_up_by_listing_the_org() -> None:
    client, requests, _ = _scripted([httpx.ReadTimeout, _listing({**_OK_RESOURCE, "name": "Ärger"})])
    assert client.create_resource("acme", name="Ärger", protocol="tcp", proxy_port=40001).resourceId == 7
    assert "query" not in requests[1].url.params


def test_a_target_whose_answer_was_lost_is_found_among_its_resources_targets() -> None:
    targets = {
        "targets": [{**_TARGET, "targetId": 2, "port": 23}, _TARGET],
        "pagination": {"total": 2, "limit": 100, "offset": 0},
    }
    client, requests, _ = _scripted([httpx.RemoteProtocolError, _answer(200, targets)])
    assert client.create_target(7, site_id=1, ip="10.0.0.1", port=22).targetId == 3
    assert [(r.method, r.url.path) for r in requests] == [
        ("PUT", "/v1/resource/7/target"),
        ("GET", "/v1/resource/7/targets"),
    ]


@pytest.mark.parametrize("failure", [httpx.ConnectError, httpx.ConnectTimeout])
def test_a_create_that_never_connected_is_retried(failure: type[httpx.TransportError]) -> None:
    client, requests, _ = _scripted([failure, _answer(201, _OK_RESOURCE)])
    assert client.create_resource("acme", name="pg", protocol="tcp", proxy_port=40001).resourceId == 7
    assert len(requests) == 2


def test_a_create_that_never_connects_gives_up_without_a_lookup() -> None:
    client, requests, _ = _scripted([httpx.ConnectError] * 4)
    with pytest.raises(PangolinUnreachable, match="cannot connect"):
        client.create_resource("acme", name="pg", protocol="tcp", proxy_port=40001)
    assert [r.method for r in requests] == ["PUT"] * 4


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
