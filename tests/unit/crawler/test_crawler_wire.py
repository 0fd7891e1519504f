"""crawler.wire on Scrapy's own objects: a 200 keeps its payload as received (the very bytes, no copy), its
reason phrase and its ``Content-Encoding``; any other status carries nothing on (a redirect's request must not
take a payload into the frontier); the request head has ``Host`` as Twisted writes it."""

from __future__ import annotations

import gzip

from scrapy.http import Request, Response

from fptrack.crawler.wire import REASON_META, WIRE_META, KeepWirePayload, WireResponse, request_head_as_sent


def test_a_200_keeps_the_payload_as_received_and_its_reason() -> None:
    coded = gzip.compress(b"<html>copy</html>")
    request = Request("http://127.0.0.1:44229/c.html", meta={REASON_META: "Fine Thanks"})
    response = Response(request.url, status=200, headers={"Content-Encoding": "gzip"}, body=coded)
    KeepWirePayload().process_response(request, response)
    wire = request.meta[WIRE_META]
    assert wire == WireResponse("Fine Thanks", (b"gzip",), coded) and wire.payload is response.body
    assert REASON_META not in request.meta


def test_other_statuses_carry_nothing_on() -> None:
    request = Request("http://127.0.0.1:44229/old", meta={REASON_META: "Moved", WIRE_META: "stale"})
    response = Response(request.url, status=302, headers={"Location": "/new"}, body=b"x" * 1000)
    KeepWirePayload().process_response(request, response)
    redirected = request.replace(url="http://127.0.0.1:44229/new")
    assert WIRE_META not in redirected.meta and REASON_META not in redirected.meta


def test_the_request_head_has_host_with_a_port_that_is_not_the_default() -> None:
    request = Request(
        "http://127.0.0.1:44229/a/b.html?x=1#part",
        headers={"User-Agent": "fptrack-test", "Accept": "text/html"},
    )
    assert request_head_as_sent(request) == (
        b"GET /a/b.html?x=1 HTTP/1.1\r\nUser-Agent: fptrack-test\r\nAccept: text/html\r\n"
        b"Host: 127.0.0.1:44229\r\n\r\n"
    )
    assert b"\r\nHost: example.com\r\n" in request_head_as_sent(Request("http://example.com/"))
    assert b"\r\nHost: example.com\r\n" in request_head_as_sent(Request("https://example.com:443/"))
    assert b"\r\nHost: example.com\r\n" in request_head_as_sent(Request("http://example.com:80/"))
    assert b"\r\nHost: example.com:443\r\n" in request_head_as_sent(Request("http://example.com:443/"))
    assert b"\r\nHost: [::1]:8080\r\n" in request_head_as_sent(Request("http://[::1]:8080/"))
    posted = request_head_as_sent(Request("http://example.com/f", method="POST", body=b"a=1"))
    assert posted.startswith(b"POST /f HTTP/1.1\r\nContent-Length: 3\r\n")
