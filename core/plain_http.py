"""One HTTP request with the standard library's :mod:`http.client`, for the product's own calls outside
Scrapy that need no guard (a time-stamping authority, a search API, the admin's health check): the same client
:mod:`crawler.guarded_http` builds the re-checks on.

Every status is an answer (a 404 or a 500 is returned, not raised); no redirect is followed and no proxy
from the environment is used; the body is read up to ``max_bytes``."""

from __future__ import annotations

import http.client
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

__all__ = ["HttpFailure", "HttpReply", "http_request"]


class HttpFailure(OSError):
    """No answer: the address is unknown or refused the connection, the request timed out, TLS failed, or
    the connection broke. ``str()`` is the reason."""


@dataclass(frozen=True)
class HttpReply:
    status: int
    headers: dict[str, str]  # lower-case names
    body: bytes


def http_request(
    url: str,
    *,
    method: str = "GET",
    body: bytes | None = None,
    headers: Mapping[str, str] | None = None,
    timeout: float = 10.0,
    max_bytes: int = 5 * 1024 * 1024,
) -> HttpReply:
    """Send one ``method`` request to the absolute ``http``/``https`` ``url``; its reply, or
    :class:`HttpFailure`."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not parts.hostname:
        raise HttpFailure(f"not an http(s) URL: {url}")
    try:
        port = parts.port
    except ValueError:
        raise HttpFailure(f"bad port in {url}") from None
    connection: http.client.HTTPConnection
    if scheme == "https":
        connection = http.client.HTTPSConnection(
            parts.hostname, port, timeout=timeout, context=ssl.create_default_context()
        )
    else:
        connection = http.client.HTTPConnection(parts.hostname, port, timeout=timeout)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    try:
        connection.request(method, target, body=body, headers=dict(headers or {}))
        response = connection.getresponse()
        reply = HttpReply(
            status=response.status,
            headers={name.lower(): value for name, value in response.getheaders()},
            body=response.read(max_bytes),
        )
    except TimeoutError:
        raise HttpFailure(f"timed out after {timeout:g} s") from None
    except (OSError, http.client.HTTPException) as error:
        raise HttpFailure(str(error) or type(error).__name__) from None
    finally:
        connection.close()
    return reply
