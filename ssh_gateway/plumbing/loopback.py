"""Loopback ports the kernel hands out, for the local rig's processes and the tests that start them."""

from __future__ import annotations

import socket

__all__ = ["free_port", "free_ports"]


def free_port() -> int:
    """A loopback port nothing listens on now (the OS picks it)."""
    (port,) = free_ports(1)
    return port


def free_ports(count: int) -> list[int]:
    """`count` loopback ports nothing listens on now, all held open at once so they differ."""
    sockets = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()
