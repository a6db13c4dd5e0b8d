"""The doctor's pieces without a stack: reading outputs, the verdict, each check on in-process sockets, the
Pangolin check against a mock transport, and the table."""

from __future__ import annotations

import dataclasses
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from ssh_gateway.core import host_identity as hi
from ssh_gateway.core.host_identity import openssh_public_key
from ssh_gateway.core.outputs import GatewayKind
from ssh_gateway.ops.doctor import LAYERS, Check, Endpoint, InstanceReport, as_json, endpoints_from_outputs, render
from ssh_gateway.ops.doctor.checks import (
    check_banner,
    check_dns,
    check_host_identity,
    check_tcp,
    judge_certificates,
    key_fingerprint,
)
from ssh_gateway.ops.doctor.connect import check_connect
from tests.host_keys import sign_host_certificate, validity_for_days

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


def test_endpoints_find_the_ca_lines_and_pins_ssh_would_use() -> None:
    ca, other = hi.generate_key_pair().public_key, hi.generate_key_pair().public_key
    outputs = {
        "endpoints": {
            name: {"host": "127.0.0.1", "port": port, "user": "root", "pangolinResourceId": 1}
            for name, port in (("gpu-01", 20001), ("gpu-02", 20002), ("vm-01", 20003))
        },
        "knownHosts": "\n".join(
            [
                f"@cert-authority 127.0.0.1,[127.0.0.1]:*,ssh-*,[ssh-*]:* {ca} ssh-gateway host CA g1 (stack local)",
                f"@cert-authority other-*.example.com {other}",
                f"ssh-vm-01,[ssh-vm-01]:* {KEY}",
            ]
        ),
        "sshConfig": "".join(
            f"Host ssh-{n}\n    HostName 127.0.0.1\n    Port 1\n    HostKeyAlias ssh-{n}\n"
            for n in ("gpu-01", "gpu-02", "vm-01")
        ),
    }
    gpu01, _, vm01 = endpoints_from_outputs(outputs, project="ssh-gateway", stack="local")
    assert (gpu01.host_key_alias, gpu01.lookup, gpu01.principal) == ("ssh-gpu-01", "ssh-gpu-01", "ssh-gpu-01")
    assert gpu01.trusted_cas == (ca,) and gpu01.pinned_key is None
    assert vm01.pinned_key == KEY and vm01.trusted_cas == (ca,)
    # Without the alias ssh looks up [host]:port, and the certificate must name the host.
    plain = endpoints_from_outputs({**outputs, "sshConfig": ""}, project="ssh-gateway", stack="local")[0]
    assert (plain.lookup, plain.principal, plain.trusted_cas) == ("[127.0.0.1]:20001", "127.0.0.1", (ca,))


# --- the verdict --------------------------------------------------------------------------------


PORT_MODE_LAYERS = tuple(layer for layer in LAYERS if layer != "connect")  # the connect layer: connect mode only


def report(*statuses: str) -> InstanceReport:
    checks = tuple(
        Check(layer, status, f"{layer} {status}")  # type: ignore[arg-type]
        for layer, status in zip(PORT_MODE_LAYERS, statuses, strict=True)
    )
    return InstanceReport(endpoint(), checks)


@pytest.mark.parametrize(
    ("statuses", "layer"),
    [
        (("ok", "ok", "ok", "ok", "skip", "ok"), None),
        (("ok", "ok", "ok", "skip", "ok", "ok"), None),  # a pinned key instead of a certificate
        (("ok", "ok", "ok", "skip", "skip", "warn"), None),  # nothing to check, Pangolin not checkable: reachable
        (("ok", "fail", "skip", "skip", "skip", "ok"), "tcp"),
        (("ok", "ok", "fail", "skip", "skip", "ok"), "banner"),
        (("ok", "fail", "skip", "skip", "skip", "fail"), "pangolin"),  # the disabled resource is why TCP is refused
        (("ok", "ok", "fail", "skip", "skip", "fail"), "pangolin"),
        (("fail", "skip", "skip", "skip", "skip", "fail"), "dns"),  # the name comes first whatever Pangolin says
        (("ok", "ok", "ok", "skip", "fail", "fail"), "hostkey"),  # a different server answers: that comes first
        (("ok", "ok", "ok", "fail", "skip", "fail"), "hostidentity"),  # so does a certificate ssh refuses
        (("ok", "ok", "ok", "ok", "skip", "fail"), "pangolin"),
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


def test_key_fingerprint_is_ssh_keygen_style() -> None:
    assert key_fingerprint(KEY).startswith("SHA256:") and "=" not in key_fingerprint(KEY)


# --- the report ---------------------------------------------------------------------------------


def test_table_json_and_notes() -> None:
    healthy = InstanceReport(endpoint(), tuple(Check(layer, "ok", "fine") for layer in LAYERS))
    broken = InstanceReport(
        endpoint(instance="gpu-02", port=40002),
        (
            Check("dns", "ok", "fine"),
            Check("tcp", "fail", "TCP connect to 127.0.0.1:40002 was refused", "publish it"),
            Check("banner", "skip", "not reached"),
            Check("hostidentity", "skip", "not reached"),
            Check("hostkey", "skip", "not reached"),
            Check("pangolin", "fail", "Pangolin resource 12 is disabled", "enable it"),
        ),
    )
    text = render([healthy, broken], stack="local", elapsed=1.25)
    lines = text.splitlines()
    assert lines[0].split() == [
        "INSTANCE", "ENDPOINT", "DNS", "TCP", "BANNER", "HOSTIDENTITY", "HOSTKEY", "PANGOLIN", "VERDICT"
    ]  # fmt: skip
    assert lines[1].split() == ["gpu-01", "127.0.0.1:40001", "ok", "ok", "ok", "ok", "ok", "ok", "healthy"]
    assert lines[2].split() == [
        "gpu-02", "127.0.0.1:40002", "ok", "FAIL", "-", "-", "-", "FAIL", "broken:", "pangolin"
    ]  # fmt: skip
    assert "gpu-02: Pangolin resource 12 is disabled\n    fix: enable it\n    also seen: TCP connect" in text
    assert lines[-1] == "2 instance(s) of stack local: 1 broken (1.2s)"

    document = json.loads(json.dumps(as_json([healthy, broken], stack="local", elapsed=1.25)))
    assert document["healthy"] is False
    assert [i["brokenLayer"] for i in document["instances"]] == [None, "pangolin"]
    assert document["instances"][1]["fix"] == "enable it"


# --- the host identity layer --------------------------------------------------------------------


@pytest.fixture(scope="module")
def issuer() -> hi.KeyPair:
    return hi.generate_key_pair()


@pytest.fixture(scope="module")
def served_key() -> hi.KeyPair:
    return hi.generate_key_pair()


def certificate(ca: hi.KeyPair, key: hi.KeyPair, *, principals: tuple[str, ...] = ("ssh-gpu-01",), **when: int) -> str:
    validity = hi.Validity(**when) if when else validity_for_days(30)
    return sign_host_certificate(
        ca_private_key=ca.private_key,
        host_public_key=key.public_key,
        principals=principals,
        key_id="unit/gpu-01",
        validity=validity,
        serial=7,
    )


def judge(certificates: list[str], ca: hi.KeyPair) -> Check:
    return judge_certificates(certificates, instance="gpu-01", ca_public_keys=[ca.public_key], principal="ssh-gpu-01")


def test_a_certificate_of_the_stack_ca_for_the_name_dialled_passes(issuer: hi.KeyPair, served_key: hi.KeyPair) -> None:
    check = judge([certificate(issuer, served_key)], issuer)
    assert check.status == "ok", check
    assert check.detail.startswith(f"certificate of {served_key.fingerprint} for ssh-gpu-01, signed by the stack's CA")
    assert issuer.fingerprint in check.detail


def test_one_good_certificate_among_several_passes(issuer: hi.KeyPair, served_key: hi.KeyPair) -> None:
    stale = certificate(hi.generate_key_pair(), served_key)
    assert judge([stale, certificate(issuer, served_key)], issuer).status == "ok"


@pytest.mark.parametrize(
    ("case", "detail", "fix"),
    [
        ("none", "the sshd serves no host certificate", "mount the Secret ssh-gpu-01-host-key"),
        ("another CA", "not by the stack's host CA", "from another CA"),
        ("wrong principal", "is not for 'ssh-gpu-01': its principals are ssh-gpu-02", "re-issue it"),
        ("expired", "expired at", "run `pulumi up`"),
        ("not yet valid", "is not valid before", "clock"),
        ("corrupt", "does not parse", "corrupt"),
    ],
)
def test_a_certificate_ssh_would_refuse_names_host_identity_with_the_fix(
    issuer: hi.KeyPair, served_key: hi.KeyPair, case: str, detail: str, fix: str
) -> None:
    now = int(time.time())
    served = {
        "none": [],
        "another CA": [certificate(hi.generate_key_pair(), served_key)],
        "wrong principal": [certificate(issuer, served_key, principals=("ssh-gpu-02",))],
        "expired": [certificate(issuer, served_key, valid_after=now - 7200, valid_before=now - 3600)],
        "not yet valid": [certificate(issuer, served_key, valid_after=now + 3600, valid_before=now + 7200)],
        "corrupt": [hi.CERTIFICATE_TYPE + " AAAAnotbase64"],
    }[case]
    check = judge(served, issuer)
    assert (check.layer, check.status) == ("hostidentity", "fail")
    assert check.detail.startswith("host identity: ") and detail in check.detail, check.detail
    assert fix in check.fix, check.fix


def test_the_layer_is_skipped_for_pinned_or_uncovered_instances() -> None:
    pinned = check_host_identity(endpoint(pinned_key=KEY, trusted_cas=(KEY,)), 1.0)
    assert (pinned.status, pinned.detail) == ("skip", "a host key is pinned (hostKey): the hostkey layer checks it")
    uncovered = check_host_identity(endpoint(), 1.0)
    assert uncovered.status == "skip" and "covers [127.0.0.1]:40001" in uncovered.detail


# --- a connect-mode instance behind a standalone Envoy ----------------------------------------------------------


def answered(status_line: bytes, connect_endpoint: Endpoint) -> Check:
    """`check_connect` on one end of a socket pair whose other end answers `status_line`."""
    ours, gateway = socket.socketpair()
    with ours, gateway:
        gateway.sendall(status_line + b"\r\ncontent-length: 0\r\n\r\n")
        return check_connect(ours, connect_endpoint, 2.0)


def test_a_standalone_envoys_404_says_to_restart_it_with_the_current_config() -> None:
    outputs = {
        "endpoints": {
            "gpu-c1": {
                "routing": "connect",
                "host": "127.0.0.1",
                "port": 20443,
                "user": "root",
                "authority": "ssh-gpu-c1.default.svc.cluster.local",
                "route": "envoyConfig/ssh-gateway.ssh-gpu-c1.default.svc.cluster.local",
                "pangolinResourceId": 3,
            }
        },
        "connect": {"via": "pangolin", "gateway": {"kind": "envoy", "listenerPort": 20080}},
    }
    [envoy] = endpoints_from_outputs(outputs, project="ssh-gateway", stack="local")
    assert envoy.gateway_kind == "envoy"
    check = answered(b"HTTP/1.1 404 Not Found", envoy)
    assert check.status == "fail"
    assert check.fix.startswith(
        "no route for ssh-gpu-c1.default.svc.cluster.local: the Envoy has no virtual host for it "
        "(envoyConfig/ssh-gateway.ssh-gpu-c1.default.svc.cluster.local), so it runs an older envoyConfig"
    )
    assert 'envoy --config-yaml "$(pulumi stack output envoyConfig)"' in check.fix
    assert "EnvoyFilter" not in check.fix and "EnvoyFilter" not in answered(b"HTTP/1.1 503 x", envoy).fix
    # The same status from an Istio gateway still names its EnvoyFilter.
    istio = dataclasses.replace(envoy, gateway_kind=GatewayKind.ISTIO, route="istio-system/ssh-gpu-c1.default.connect")
    assert "EnvoyFilter istio-system/ssh-gpu-c1.default.connect" in answered(b"HTTP/1.1 404 Not Found", istio).fix
