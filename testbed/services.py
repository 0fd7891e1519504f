"""Whether a service the tests and benchmarks need (PostgreSQL, Redis) answers on its address."""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

__all__ = ["reachable"]


def reachable(url: str, default_port: int) -> bool:
    """True when a TCP connection to ``url``'s host and port (``default_port`` when it names none) opens
    within two seconds."""
    parts = urlsplit(url)
    try:
        with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or default_port), timeout=2):
            return True
    except OSError:
        return False
