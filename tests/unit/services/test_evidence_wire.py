"""The exchange as received, in a WARC: the gzip payload as received with the peer's address and a warcinfo
naming software, operator and user agent; format 1 rows still make a WARC that ``warcio check`` and fptrack's
own reader accept; the verifier finds the snapshot by undoing the content coding, in bounded memory."""

from __future__ import annotations

import gzip
import hashlib
import io
import struct
import subprocess
import sys
import zlib
from datetime import UTC, datetime
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

from fptrack.services.evidence import bundle
from fptrack.services.evidence.bundle import BundleError, page_warc, warcinfo_fields
from fptrack.storage.exchanges import RawExchange, unpack_exchange
from fptrack.storage.match_life import Evidence
from fptrack.storage.models import Page

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


def _format_1(exchange: RawExchange) -> bytes:
    """A row as fptrack stored it before format 2 (five parts, the decoded body only)."""
    out = bytearray((1,))
    for part in (exchange.url.encode(), exchange.request_head, exchange.response_head, exchange.body, b""):
        assert part is not None
        out += struct.pack(">I", len(part)) + part
    return zlib.compress(out, 1)


def _page_and_content(exchange: RawExchange) -> tuple[Page, Evidence]:
    page = Page(url=exchange.url, final_url=exchange.url, host="pirate.example", status=200, encoding="utf-8")
    content = Evidence(
        text="正文，海上的灯塔。",
        title="盗版",
        final_url=exchange.url,
        status=200,
        content_sha256="",
        snapshot_sha256=exchange.snapshot_sha256,
        fetched_at=WHEN,
        version_id=None,
    )
    return page, content


def test_format_1_rows_still_read_and_make_a_warc_as_before(tmp_path: Path) -> None:
    old = RawExchange(
        "http://pirate.example/c.html",
        b"GET /c.html HTTP/1.1\r\nHost: pirate.example\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: %d\r\n\r\n" % len(BODY),
        BODY,
        WHEN,
    )
    back = unpack_exchange(_format_1(old), WHEN)
    assert back == old and back.payload == BODY and back.wire_body is None and back.ip_address == ""
    warc, described = page_warc(*_page_and_content(back), back)
    (tmp_path / "old.warc.gz").write_bytes(warc)
    checked = subprocess.run(
        [sys.executable, "-m", "warcio.cli", "check", str(tmp_path / "old.warc.gz")],
        capture_output=True,
        check=False,
    )
    assert checked.returncode == 0, checked.stdout
    records = bundle._read_warc(warc)
    response = records[described["response_record"]]
    assert response.sha256 == back.snapshot_sha256 and response.decoded_sha256 is None
    assert "WARC-IP-Address" not in response.headers


def test_the_warc_response_holds_the_gzip_payload_with_the_peer_and_the_snapshot_decodes(
    tmp_path: Path,
) -> None:
    exchange = _wire_exchange()
    warc, described = page_warc(*_page_and_content(exchange), exchange, operator="Rights\r\nLtd.")
    (tmp_path / "page.warc.gz").write_bytes(warc)
    checked = subprocess.run(
        [sys.executable, "-m", "warcio.cli", "check", str(tmp_path / "page.warc.gz")],
        capture_output=True,
        check=False,
    )
    assert checked.returncode == 0, checked.stdout
    found = {r.rec_type: (r, r.raw_stream.read()) for r in ArchiveIterator(io.BytesIO(warc))}
    response, payload = found["response"]
    assert payload == CODED and response.http_headers.to_bytes() == WIRE_HEAD
    assert response.rec_headers.get_header("WARC-IP-Address") == "127.0.0.1"
    assert found["request"][0].http_headers.to_bytes() == REQUEST_HEAD
    info = found["warcinfo"][1].decode()
    assert "operator: Rights Ltd.\r\n" in info and "http-header-user-agent: fptrack-test\r\n" in info
    assert described["snapshot_is"] == "the response payload, gzip decoded"
    record = bundle._read_warc(warc)[described["response_record"]]
    assert record.sha256 == hashlib.sha256(CODED).hexdigest()
    assert record.decoded_sha256 == exchange.snapshot_sha256


def test_warcinfo_says_when_the_operator_and_user_agent_are_not_known() -> None:
    fields = warcinfo_fields(None, "")
    assert fields["operator"].startswith("not stated") and fields["http-header-user-agent"].startswith(
        "not known"
    )
    assert fields["software"].startswith("fptrack/") and fields["format"] == "WARC File Format 1.1"


def test_a_payload_decoding_beyond_the_bound_fails_in_bounded_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    bomb = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    coded = b"".join(bomb.compress(b"\0" * (1 << 20)) for _ in range(64)) + bomb.flush()  # 64 MiB of zeros
    exchange = RawExchange(
        "http://x/",
        b"",
        b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\n\r\n",
        b"",
        WHEN,
        wire_body=coded,
    )
    warc, _ = page_warc(*_page_and_content(exchange), exchange)
    monkeypatch.setattr(bundle, "MAX_WARC_EXPANSION", 8 << 20)
    with pytest.raises(BundleError, match="decodes beyond"):
        bundle._read_warc(warc)


def test_a_payload_that_is_not_what_its_coding_says_fails_in_one_line() -> None:
    exchange = RawExchange(
        "http://x/",
        b"",
        b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\n\r\n",
        b"",
        WHEN,
        wire_body=b"not gzip",
    )
    warc, _ = page_warc(*_page_and_content(exchange), exchange)
    with pytest.raises(BundleError, match="is not gzip"):
        bundle._read_warc(warc)
