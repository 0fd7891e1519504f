"""What came over the wire, kept for the evidence of a page (:mod:`storage.exchanges`): the status line's
reason phrase, the payload before its content coding was undone, the request head as Twisted wrote it.

Scrapy's Response keeps the status code but not the reason phrase (``200 Fine Thanks``), and its
HttpCompressionMiddleware (order 590) replaces a gzip, deflate or br payload by the decoded body and drops the
``Content-Encoding`` header. Two parts keep them, at no cost but a reference:

- :class:`WireHTTP11Handler`, Scrapy's HTTP/1.1 download handler whose agent notes the reason phrase of each
  response in the request's meta (:data:`REASON_META`);
- :class:`KeepWirePayload`, a downloader middleware placed above 590 (``process_response`` runs from the
  highest order down, so it sees the response first): it puts a :class:`WireResponse` in the request's meta
  (:data:`WIRE_META`) of a 200 response (the only ones kept as evidence): the reason, the
  ``Content-Encoding`` values and the payload as received (the same bytes object the response holds, no
  copy).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlunparse

from scrapy.core.downloader.handlers.http11 import (  # the agent: the one place the reason phrase is seen
    HTTP11DownloadHandler,
    _ScrapyAgent,
)
from scrapy.crawler import Crawler
from scrapy.exceptions import ResponseDataLossError
from scrapy.http import Request, Response
from scrapy.utils._download_handlers import get_dataloss_msg, wrap_twisted_exceptions
from scrapy.utils.defer import maybe_deferred_to_future
from scrapy.utils.httpobj import urlparse_cached
from twisted.web.http_headers import Headers as TxHeaders

__all__ = [
    "REASON_META",
    "WIRE_META",
    "KeepWirePayload",
    "WireHTTP11Handler",
    "WireResponse",
    "request_head_as_sent",
]

logger = logging.getLogger(__name__)
REASON_META = "fptrack_reason_phrase"
WIRE_META = "fptrack_wire"


@dataclass(frozen=True)
class WireResponse:
    """A response as received, where Scrapy's Response no longer says it: the reason phrase (``None``: not
    known, the response came another way), the ``Content-Encoding`` values and the payload (after the
    transfer coding, before the content coding was undone)."""

    reason: str | None
    content_encoding: tuple[bytes, ...]
    payload: bytes


class _ReasonKeepingAgent(_ScrapyAgent):
    def _cb_latency(self, result: Any, request: Request, start_time: float) -> Any:
        phrase = getattr(result, "phrase", None)
        if isinstance(phrase, bytes):
            request.meta[REASON_META] = phrase.decode("latin-1")
        return super()._cb_latency(result, request, start_time)


class WireHTTP11Handler(HTTP11DownloadHandler):
    """Scrapy's HTTP/1.1 handler, its agent keeping each response's reason phrase (see the module)."""

    async def download_request(self, request: Request) -> Response:
        agent = _ReasonKeepingAgent(
            contextFactory=self._contextFactory,
            bindAddress=self._bind_address,
            pool=self._pool,
            maxsize=self._default_maxsize,
            warnsize=self._default_warnsize,
            fail_on_dataloss=self._fail_on_dataloss,
            crawler=self._crawler,
            tls_verbose_logging=self._tls_verbose_logging,
        )
        try:
            with wrap_twisted_exceptions():
                response: Response = await maybe_deferred_to_future(agent.download_request(request))
                return response
        except ResponseDataLossError:
            if not self._fail_on_dataloss_warned:
                self._fail_on_dataloss_warned = True
                logger.warning(get_dataloss_msg(request.url))
            raise


class KeepWirePayload:
    """Keep the response as received in ``request.meta[WIRE_META]``, before Scrapy decodes its payload."""

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> KeepWirePayload:
        return cls()

    def process_response(self, request: Request, response: Response, spider: object = None) -> Response:
        reason = request.meta.pop(REASON_META, None)
        if response.status != 200:
            # only a 200 is kept as evidence; and a request made from this one (a redirect, a retry) must not
            # carry a payload into the frontier, which may pickle it to disk or Redis
            request.meta.pop(WIRE_META, None)
            return response
        request.meta[WIRE_META] = WireResponse(
            reason=reason,
            content_encoding=tuple(response.headers.getlist(b"Content-Encoding")),
            payload=response.body,
        )
        return response


def request_head_as_sent(request: Request) -> bytes:
    """The head of ``request`` as Twisted's HTTP/1.1 client writes it for Scrapy (through a connection pool,
    no proxy): the request line with the URL's path and query, ``Content-Length`` when there is a body, the
    request's headers in their order with the names Twisted writes, then the ``Host`` Twisted adds (with the
    port when the URL names one that is not its scheme's default)."""
    parsed = urlparse_cached(request)  # Scrapy's, cached on the request: parsed as Twisted parses it
    target = urlunparse(("", "", parsed.path, parsed.params, parsed.query, "")) or "/"
    lines = [b"%s %s HTTP/1.1" % (request.method.encode("ascii"), target.encode("ascii"))]
    if request.body:
        lines.append(b"Content-Length: %d" % len(request.body))
    headers = TxHeaders(request.headers)
    if not headers.hasHeader(b"host"):
        host, _, port = parsed.netloc.rpartition(":")  # the host as the URL writes it ([::1] bracketed)
        if not port.isdigit():  # no port, or the end of an IPv6 address
            host, port = parsed.netloc, ""
        if port and (parsed.scheme, int(port)) not in (("http", 80), ("https", 443)):
            host += f":{int(port)}"
        headers.addRawHeader(b"host", host.encode("ascii"))
    for name, values in headers.getAllRawHeaders():
        lines += [name + b": " + value for value in values]
    return b"\r\n".join(lines) + b"\r\n\r\n"
