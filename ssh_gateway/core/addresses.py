"""Host names, IP addresses and URLs as config and resource inputs accept them: one definition each.

Each function returns the value (normalised where that is safe) or raises a `ValueError` that names it and
says what is allowed; pydantic models and dynamic providers wrap them, so both sides agree.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

__all__ = [
    "DNS_LABEL_MAX",
    "DNS_NAME_MAX",
    "ListenAddress",
    "check_dns_label",
    "check_dns_name",
    "check_host",
    "check_hostname",
    "check_http_url",
    "parse_listen_address",
]

DNS_LABEL_MAX: Final = 63
"""The most characters of one DNS label (RFC 1035 §2.3.4)."""
DNS_NAME_MAX: Final = 253
"""The most characters of a DNS name written out, dots included (RFC 1035 §2.3.4, less the root and length bytes)."""

_LABEL: Final = rf"[a-z0-9](?:[a-z0-9-]{{0,{DNS_LABEL_MAX - 2}}}[a-z0-9])?"
_DNS_LABEL: Final = re.compile(_LABEL)
# A hostname's labels are DNS labels in any case (DNS compares names case-insensitively); Kubernetes wants lowercase.
_HOSTNAME: Final = re.compile(rf"(?i)(?=.{{1,{DNS_NAME_MAX}}}$){_LABEL}(?:\.{_LABEL})*")
_DOTTED_NUMBERS: Final = re.compile(r"[0-9.]+")


def check_dns_label(value: object, *, what: str = "", max_length: int = DNS_LABEL_MAX) -> str:
    """A DNS label as Kubernetes names use it (RFC 1123): up to `max_length` (at most 63) lowercase letters, digits
    and '-', starting and ending with a letter or digit. `what` names the value in the error."""
    if not isinstance(value, str) or len(value) > max_length or not _DNS_LABEL.fullmatch(value):
        named = f"{what} {value!r}" if what else repr(value)
        raise ValueError(
            f"{named} is not a DNS label: 1-{max_length} lowercase letters, digits and '-', starting and ending "
            "with a letter or digit"
        )
    return value


def check_dns_name(value: object, *, what: str = "") -> str:
    """A lowercase DNS name such as `cluster.local`: dot-separated DNS labels, 253 characters at most."""
    named = f"{what} {value!r}" if what else repr(value)
    if not isinstance(value, str) or not value or len(value) > DNS_NAME_MAX:
        raise ValueError(f"{named} is not a DNS name: dot-separated DNS labels, 1-{DNS_NAME_MAX} characters")
    for label in value.split("."):
        if not _DNS_LABEL.fullmatch(label):
            raise ValueError(f"{named} is not a DNS name: label {label!r} is not a DNS label")
    return value


def check_hostname(value: str) -> str:
    """A DNS name such as `ssh.example.com` (labels of letters, digits and inner '-', 253 characters at most).

    All-numeric dotted names are refused: `10.0.0.256` is a mistyped address, not a host called that.
    """
    if not _HOSTNAME.fullmatch(value) or _DOTTED_NUMBERS.fullmatch(value):
        raise ValueError(f"{value!r} is not a hostname such as ssh.example.com")
    return value


def check_host(value: str) -> str:
    """An IPv4 or IPv6 address, or a hostname."""
    try:
        ipaddress.ip_address(value)
    except ValueError:
        try:
            check_hostname(value)
        except ValueError:
            raise ValueError(f"{value!r} is neither an IP address such as 10.0.0.4 nor a hostname") from None
    return value


def check_http_url(value: str) -> str:
    """An http(s) URL with a host and no credentials, e.g. `https://api.example.com/v1`; no trailing '/'."""
    allowed = "an http(s) URL such as https://api.example.com/v1"
    try:
        parts = urlsplit(value)
        port = parts.port  # raises on a port that is not a number
    except ValueError:
        raise ValueError(f"{value!r} is not {allowed}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname or any(c.isspace() for c in value):
        raise ValueError(f"{value!r} is not {allowed}")
    if parts.username is not None or parts.password is not None:
        raise ValueError(f"{value!r} carries credentials; give {allowed} and the key as pangolin:apiKey")
    if port == 0:
        raise ValueError(f"{value!r} has port 0; give {allowed}")
    check_host(parts.hostname)
    return value.rstrip("/")


@dataclass(frozen=True, kw_only=True)
class ListenAddress:
    """Where a server listens: a host ("" for every interface) and a port (0: any free one)."""

    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def parse_listen_address(text: str) -> ListenAddress:
    """`HOST:PORT`, e.g. `0.0.0.0:9090`, `127.0.0.1:9090`, `[::]:9090`, `:9090` (every interface)."""
    allowed = (
        "HOST:PORT such as 0.0.0.0:9090, 127.0.0.1:9090, [::]:9090 or :9090 (every interface), "
        "with a port from 0 (any free one) to 65535"
    )
    host, colon, port = text.rpartition(":")
    if not colon or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"{text!r} is not {allowed}")
    bracketed = host.startswith("[") and host.endswith("]")
    if bracketed:
        host = host[1:-1]
    try:
        if bracketed or ":" in host:
            ipaddress.IPv6Address(host)
        elif host:
            check_host(host)
    except ValueError:
        raise ValueError(f"{text!r} is not {allowed}: {host!r} is not a host") from None
    return ListenAddress(host=host, port=int(port))
