"""The cluster reader's safety (ssh_gateway/kube): a listing is complete or a `KubeError`, never a shorter list,
and no error message carries a credential. The pages come from a fake `fetch`; tests/integration/
test_kube_reader.py reads the real kube-apiserver."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import urllib3
from kubernetes.client.exceptions import ApiException

from ssh_gateway.kube import KubeError, api_client, collect_pages
from ssh_gateway.kube.listing import decoded_page

pytestmark = pytest.mark.unit


def pages(*answers: Mapping[str, Any] | Exception) -> tuple[list[str | None], Any]:
    """A fetch that gives `answers` in turn, and the continue tokens it was asked with."""
    asked: list[str | None] = []
    queue = list(answers)

    def fetch(token: str | None) -> Mapping[str, Any]:
        asked.append(token)
        answer = queue.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    return asked, fetch


def page(names: list[str], token: str = "", version: str = "7") -> dict[str, Any]:
    return {"metadata": {"continue": token, "resourceVersion": version}, "items": [{"name": n} for n in names]}


def api_error(status: int, reason: str, message: str) -> ApiException:
    exc = ApiException(status=status, reason=reason, body=json.dumps({"kind": "Status", "message": message}))
    exc.headers = {"Authorization": "Bearer s3cret-token"}  # what str(exc) would print
    return exc


def test_every_page_is_followed_to_the_last() -> None:
    asked, fetch = pages(page(["a", "b"], "t1", "7"), page(["c"], "t2", "7"), page(["d"], "", "7"))
    items, version = collect_pages(fetch, "pods")
    assert [i["name"] for i in items] == ["a", "b", "c", "d"]
    assert asked == [None, "t1", "t2"]
    assert version == "7"


def test_a_410_on_a_continue_token_fails_the_whole_listing() -> None:
    _, fetch = pages(page(["a"], "t1"), api_error(410, "Gone", "The provided continue parameter is too old"))
    with pytest.raises(KubeError, match=r"cannot list pods: the listing expired between two pages \(410 Gone\)"):
        collect_pages(fetch, "pods")


def test_a_forbidden_listing_names_the_api_servers_message_and_no_header() -> None:
    message = 'pods is forbidden: User "tenant" cannot list resource "pods" in the namespace "gpu-users"'
    _, fetch = pages(api_error(403, "Forbidden", message))
    with pytest.raises(KubeError) as info:
        collect_pages(fetch, "pods")
    assert str(info.value) == f"cannot list pods: 403 Forbidden: {message}"
    assert "s3cret" not in str(info.value)


@pytest.mark.parametrize(
    "bad",
    [{"items": []}, {"metadata": None, "items": []}, {"metadata": {}}, {"metadata": {}, "items": None}, {}],
)
def test_a_page_without_metadata_or_items_fails_the_listing(bad: Mapping[str, Any]) -> None:
    _, fetch = pages(page(["a"], "t1"), bad)
    with pytest.raises(KubeError, match="a page came without metadata or items"):
        collect_pages(fetch, "pods")


def test_a_server_error_or_a_timeout_on_a_later_page_fails_the_listing() -> None:
    _, fetch = pages(page(["a"], "t1"), api_error(503, "Service Unavailable", "etcd is down"))
    with pytest.raises(KubeError, match="503 Service Unavailable: etcd is down"):
        collect_pages(fetch, "pods")
    _, fetch = pages(page(["a"], "t1"), urllib3.exceptions.ReadTimeoutError(None, "/api", "read timed out"))  # type: ignore[arg-type]
    with pytest.raises(KubeError, match="ReadTimeoutError"):
        collect_pages(fetch, "pods")


def test_a_continue_token_given_twice_fails_instead_of_looping() -> None:
    _, fetch = pages(page(["a"], "t1"), page(["b"], "t1"), page(["c"], "t1"))
    with pytest.raises(KubeError, match="repeated a continue token"):
        collect_pages(fetch, "pods")


def test_an_answer_that_is_not_json_is_a_page_without_metadata() -> None:
    assert decoded_page(b"<html>proxy error</html>") == {}
    assert decoded_page(b"[1, 2]") == {}
    assert decoded_page(b'{"metadata": {}, "items": []}') == {"metadata": {}, "items": []}


def test_a_kubeconfig_path_that_does_not_exist_is_named(tmp_path: Path) -> None:
    missing = str(tmp_path / "nope")
    with pytest.raises(KubeError, match=f"kubernetes.kubeconfig '{missing}' is neither a file that exists"):
        api_client(missing, None)


def test_kubeconfig_contents_are_never_echoed() -> None:
    contents = "apiVersion: v1\nusers:\n- name: x\n  user: {token: s3cret-token}\n"
    with pytest.raises(KubeError) as info:
        api_client(contents, "no-such-context")
    assert "s3cret" not in str(info.value)
    assert "cannot load the kubeconfig (context 'no-such-context')" in str(info.value)
