"""Stored exchanges, format 2: the payload as received (a gzip payload kept coded, the decoded body derived
from it when it decodes to it exactly, both kept when not), the peer's address; format 1 rows still read."""

from __future__ import annotations

import gzip
import hashlib
import struct
import zlib
from datetime import UTC, datetime

import brotli
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fptrack.storage.exchanges import RawExchange, decode_content, pack_exchange, unpack_exchange

WHEN = datetime(2026, 11, 29, 16, 0, tzinfo=UTC)
BODY = (
    "<html><head><title>盗版</title></head><body>" + "正文，海上的灯塔。" * 400 + "</body></html>"
).encode()
CODED = gzip.compress(BODY, mtime=0)
REQUEST_HEAD = b"GET /c.html HTTP/1.1\r\nUser-Agent: fptrack-test\r\nHost: pirate.example:8080\r\n\r\n"
WIRE_HEAD = (
    b"HTTP/1.1 200 Fine Thanks\r\nContent-Length: %d\r\nContent-Type: text/html; charset=utf-8\r\n"
    b"Content-Encoding: gzip\r\n\r\n" % len(CODED)
)


def _wire_exchange() -> RawExchange:
    return RawExchange(
        url="http://pirate.example:8080/c.html",
        request_head=REQUEST_HEAD,
        response_head=WIRE_HEAD,
        body=BODY,
        fetched_at=WHEN,
        ip_address="127.0.0.1",
        wire_body=CODED,
    )


def format_1(exchange: RawExchange) -> bytes:
    """A row as fptrack stored it before format 2 (five parts, the decoded body only)."""
    out = bytearray((1,))
    for part in (exchange.url.encode(), exchange.request_head, exchange.response_head, exchange.body, b""):
        assert part is not None
        out += struct.pack(">I", len(part)) + part
    return zlib.compress(out, 1)


def test_format_2_keeps_the_payload_as_received_and_derives_the_body_from_it() -> None:
    exchange = _wire_exchange()
    stored = pack_exchange(exchange)
    back = unpack_exchange(stored, WHEN)
    assert back == exchange
    assert back.payload == CODED and back.snapshot_sha256 == hashlib.sha256(BODY).hexdigest()
    # the coded payload is stored as it is (compressing it again gains nothing), not the body beside it
    assert stored[:1] == b"\x02" and stored.endswith(CODED)
    assert BODY not in zlib.decompressobj().decompress(stored[1:])
    assert len(stored) < len(CODED) + len(WIRE_HEAD) + len(REQUEST_HEAD) + 200


def test_a_payload_that_does_not_decode_to_the_body_keeps_both() -> None:
    odd = RawExchange(
        "http://x/", b"", WIRE_HEAD.replace(b"gzip", b"zstd"), BODY, WHEN, wire_body=b"\x28\xb5\x2f\xfd..."
    )
    back = unpack_exchange(pack_exchange(odd), WHEN)
    assert back.body == BODY and back.wire_body == odd.wire_body


@settings(max_examples=40, deadline=None)
@given(st.binary(max_size=2000), st.lists(st.sampled_from(["gzip", "deflate", "br"]), min_size=1, max_size=2))
def test_decode_content_undoes_the_codings_in_order(body: bytes, codings: list[str]) -> None:
    coded = body
    for coding in codings:
        coded = {"gzip": gzip.compress, "deflate": zlib.compress, "br": brotli.compress}[coding](coded)
    assert decode_content(coded, codings) == body
    with pytest.raises(ValueError, match="not gzip-coded"):
        decode_content(b"plain", ["gzip"])


def test_format_1_rows_still_read() -> None:
    old = RawExchange(
        "http://p/", b"GET / HTTP/1.1\r\nHost: p\r\n\r\n", b"HTTP/1.1 200 OK\r\n\r\n", BODY, WHEN
    )
    back = unpack_exchange(format_1(old), WHEN)
    assert back == old and back.payload == BODY and back.wire_body is None and back.ip_address == ""
    with pytest.raises(ValueError, match="unknown page exchange format"):
        unpack_exchange(zlib.compress(b"\x03"), WHEN)
