"""The doctor's pieces without a stack: reading outputs, the verdict, each check on in-process sockets, the
Pangolin check against a mock transport, and the table."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from ssh_gateway.ops.doctor import Check, Endpoint, InstanceReport, as_json, endpoints_from_outputs, render
from ssh_gateway.ops.doctor.checks import check_banner, check_dns, check_tcp, fingerprint
from ssh_gateway.ops.doctor.model import parse_known_hosts
from ssh_gateway.sshkeys import openssh_public_key

pytestmark = pytest.mark.unit

KEY = openssh_public_key(bytes(32))


def endpoint(**overrides: Any) -> Endpoint:
    values: dict[str, Any] = {
        "instance": "gpu-01",
        "host": "127.0.0.1",
        "port": 40001,
        "user": "root",
        "resource_id": 12,
        "pinned_key": None,
        "expected_name": "ssh-gateway/local/gpu-01",
    }
    values.update(overrides)
    return Endpoint(**values)


# --- reading the stack's outputs ----------------------------------------------------------------


def test_known_hosts_lines_by_host_and_port() -> None:
    text = f"[gw.example.com]:40001 {KEY} comment\n# a comment\nplain.example.com {KEY}\n\n"
    assert parse_known_hosts(text) == {("gw.example.com", 40001): KEY, ("plain.example.com", 22): KEY}


def test_endpoints_from_outputs_carry_the_pin_and_the_expected_name() -> None:
    outputs = {
        "endpoints": {
            "b": {"host": "gw", "port": 40002, "user": "dev", "pangolinResourceId": 7},
            "a": {"host": "gw", "port": 40001, "user": "root", "pangolinResourceId": 3},
        },
        "knownHosts": f"[gw]:40002 {KEY}",
    }
    a, b = endpoints_from_outputs(outputs, project="ssh-gateway", stack="prod")
    assert (a.instance, a.port, a.pinned_key, a.resource_id) == ("a", 40001, None, 3)
    assert (b.instance, b.user, b.pinned_key) == ("b", "dev", KEY)
    assert b.expected_name == "ssh-gateway/prod/b"


# --- the verdict --------------------------------------------------------------------------------


def report(*statuses: str) -> InstanceReport:
    layers = ("dns", "tcp", "banner", "hostkey", "pangolin")
    checks = tuple(Check(layer, status, f"{layer} {status}") for layer, status in zip(layers, statuses, strict=True))  # type: ignore[arg-type]
    return InstanceReport(endpoint(), checks)


@pytest.mark.parametrize(
    ("statuses", "layer"),
    [
        (("ok", "ok", "ok", "ok", "ok"), None),
        (("ok", "ok", "ok", "skip", "warn"), None),  # no pin, Pangolin not checkable: still reachable
        (("ok", "fail", "skip", "skip", "ok"), "tcp"),
        (("ok", "ok", "fail", "skip", "ok"), "banner"),
        (("ok", "fail", "skip", "skip", "fail"), "pangolin"),  # the disabled resource is why TCP is refused
        (("ok", "ok", "fail", "skip", "fail"), "pangolin"),
        (("fail", "skip", "skip", "skip", "fail"), "dns"),  # the name comes first whatever Pangolin says
        (("ok", "ok", "ok", "fail", "fail"), "hostkey"),  # a different server answers: that comes first
        (("ok", "ok", "ok", "ok", "fail"), "pangolin"),
    ],
)
def test_first_broken_layer(statuses: tuple[str, ...], layer: str | None) -> None:
    broken = report(*statuses).broken
    assert (broken.layer if broken else None) == layer


# --- network checks on in-process sockets -------------------------------------------------------


@pytest.fixture
def server() -> Iterator[Callable[[Callable[[socket.socket], None]], int]]:
    """Starts a one-connection TCP server running `handle`; returns its port."""
    listeners: list[socket.socket] = []

    def start(handle: Callable[[socket.socket], None]) -> int:
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        listeners.append(listener)

        def serve() -> None:
            conn, _ = listener.accept()
            with conn:
                handle(conn)

        threading.Thread(target=serve, daemon=True).start()
        return int(listener.getsockname()[1])

    yield start
    for listener in listeners:
        listener.close()


def banner_of(port: int, timeout: float = 1.0) -> Check:
    with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
        return check_banner(sock, f"127.0.0.1:{port}", timeout)


def test_banner_after_other_lines(server: Callable[[Callable[[socket.socket], None]], int]) -> None:
    port = server(lambda c: c.sendall(b"welcome\r\nSSH-2.0-OpenSSH_9.2p1 Debian\r\n"))
    check = banner_of(port)
    assert (check.status, check.detail) == ("ok", "SSH-2.0-OpenSSH_9.2p1 Debian")


def test_closed_without_banner_is_a_down_target(server: Callable[[Callable[[socket.socket], None]], int]) -> None:
    check = banner_of(server(lambda c: None))
    assert check.status == "fail"
    assert "accepted the connection and closed it" in check.detail
    assert "target behind Pangolin is down" in check.fix


def test_another_protocol_is_not_sshd(server: Callable[[Callable[[socket.socket], None]], int]) -> None:
    check = banner_of(server(lambda c: c.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")))
    assert check.status == "fail"
    assert "answered 'HTTP/1.1 400 Bad Request" in check.detail
    assert "not sshd" in check.fix


def test_silence_times_out_within_the_timeout(server: Callable[[Callable[[socket.socket], None]], int]) -> None:
    port = server(lambda c: time.sleep(2))
    started = time.monotonic()
    check = banner_of(port, timeout=0.3)
    assert time.monotonic() - started < 1.0
    assert check.status == "fail" and "no SSH banner from" in check.detail and "within 0.3s" in check.detail


def test_connection_refused_names_the_gateway_layers() -> None:
    with socket.socket() as bound:  # bound, not listening: connects are refused
        bound.bind(("127.0.0.1", 0))
        port = int(bound.getsockname()[1])
        check, sock = check_tcp("gw", ["127.0.0.1"], port, 1.0)
    assert sock is None
    assert check.status == "fail" and check.detail == f"TCP connect to gw:{port} was refused"
    assert f"`tcp-{port}` entry point" in check.fix


def test_unresolvable_name_fails_the_dns_layer() -> None:
    started = time.monotonic()
    check, addresses = check_dns("no-such-host.invalid", 22, 2.0)  # .invalid never resolves (RFC 6761)
    assert time.monotonic() - started < 2.5
    assert addresses == [] and check.status == "fail" and "no-such-host.invalid" in check.detail
    assert "DNS record" in check.fix


def test_fingerprint_is_ssh_keygen_style() -> None:
    assert fingerprint(KEY).startswith("SHA256:") and "=" not in fingerprint(KEY)


# --- the report ---------------------------------------------------------------------------------


def test_table_json_and_notes() -> None:
    healthy = InstanceReport(
        endpoint(), tuple(Check(layer, "ok", "fine") for layer in ("dns", "tcp", "banner", "hostkey", "pangolin"))
    )
    broken = InstanceReport(
        endpoint(instance="gpu-02", port=40002),
        (
            Check("dns", "ok", "fine"),
            Check("tcp", "fail", "TCP connect to 127.0.0.1:40002 was refused", "publish it"),
            Check("banner", "skip", "not reached"),
            Check("hostkey", "skip", "not reached"),
            Check("pangolin", "fail", "Pangolin resource 12 is disabled", "enable it"),
        ),
    )
    text = render([healthy, broken], stack="local", elapsed=1.25)
    lines = text.splitlines()
    assert lines[0].split() == ["INSTANCE", "ENDPOINT", "DNS", "TCP", "BANNER", "HOSTKEY", "PANGOLIN", "VERDICT"]
    assert lines[1].split() == ["gpu-01", "127.0.0.1:40001", "ok", "ok", "ok", "ok", "ok", "healthy"]
    assert lines[2].split() == ["gpu-02", "127.0.0.1:40002", "ok", "FAIL", "-", "-", "FAIL", "broken:", "pangolin"]
    assert "gpu-02: Pangolin resource 12 is disabled\n    fix: enable it\n    also seen: TCP connect" in text
    assert lines[-1] == "2 instance(s) of stack local: 1 broken (1.2s)"

    document = json.loads(json.dumps(as_json([healthy, broken], stack="local", elapsed=1.25)))
    assert document["healthy"] is False
    assert [i["brokenLayer"] for i in document["instances"]] == [None, "pangolin"]
    assert document["instances"][1]["fix"] == "enable it"
