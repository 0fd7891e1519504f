"""A downloaded archive larger than FPTRACK_EVIDENCE_MAX_PAYLOAD goes into the bundle's WARC cut at the cap:
the response record says so (``WARC-Truncated: length``, WARC 1.1) with the full payload's length and
SHA-256, as do the warcinfo record and evidence.json; the bundle verifies, says the payload is truncated and
what the full one hashes to, and the capture time-stamp taken over the whole response still verifies. A
truncation note that disagrees with its record fails. SQLite and PostgreSQL."""

from __future__ import annotations

import gzip
import io
import json
import os
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from cryptography import x509
from sqlalchemy.orm import Session
from warcio.archiveiterator import ArchiveIterator

from fptrack.core.settings import Settings
from fptrack.jobs.capture_stamps import stamp_captures
from fptrack.services.evidence import bundle
from fptrack.services.evidence.bundle import (
    BundleError,
    build_bundle,
    load_signing_key,
    public_key_pem,
    sha256_hex,
    verify_bundle,
)
from fptrack.storage.exchanges import RawExchange, keep_exchanges
from fptrack.storage.models import Match
from tests.support.admin_seed import Seeded, seed
from tests.support.tsa import LocalTsa, local_tsa

FETCHED = datetime(2026, 11, 25, 17, 0, tzinfo=UTC)
CAP = 64 * 1024
REQUEST_HEAD = b"GET /down/book.zip HTTP/1.1\r\nHost: pirate.example\r\nUser-Agent: fptrack-test\r\n\r\n"


def _zip() -> bytes:
    """A zipped book of about 300 KB that does not compress (a stored member of random bytes beside it)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("第一卷/003.txt", "第三章 山中\n正文。".encode(), zipfile.ZIP_DEFLATED)
        archive.writestr("cover.jpg", os.urandom(300 * 1024), zipfile.ZIP_STORED)
    return buffer.getvalue()


def _exchange(url: str, coded: bool) -> RawExchange:
    body = _zip()
    if not coded:
        head = b"HTTP/1.1 200 OK\r\nContent-Type: application/zip\r\nContent-Length: %d\r\n\r\n" % len(body)
        return RawExchange(url, REQUEST_HEAD, head, body, FETCHED)
    wire = gzip.compress(body, mtime=0)
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/zip\r\nContent-Encoding: gzip\r\n\r\n"
    return RawExchange(url, REQUEST_HEAD, head, body, FETCHED, wire_body=wire)


def _flag(session: Session, coded: bool) -> tuple[Seeded, RawExchange]:
    seeded = seed(session)
    match = session.get(Match, seeded.hostile_match_id)
    assert match is not None
    exchange = _exchange(match.page.final_url or match.page.url, coded)
    match.page.snapshot_sha256 = exchange.snapshot_sha256
    keep_exchanges(session, [(match.page_id, exchange)])
    session.commit()
    return seeded, exchange


@pytest.fixture
def tsa(tmp_path: Path) -> Iterator[LocalTsa]:
    with local_tsa(tmp_path / "tsa") as authority:
        yield authority


@pytest.mark.parametrize("coded", [False, True], ids=["as-is", "gzip-coded"])
def test_a_payload_over_the_cap_is_cut_said_so_and_verifies(
    session: Session, settings: Settings, tsa: LocalTsa, tmp_path: Path, coded: bool
) -> None:
    seeded, exchange = _flag(session, coded)
    payload = exchange.payload or b""
    assert len(payload) > CAP
    capped = settings.with_overrides(tsa_url=tsa.url, evidence_max_payload=CAP)
    assert stamp_captures(session, capped).stamped == 1  # sealed over the whole response
    data = build_bundle(session, seeded.hostile_match_id, capped)

    archive = zipfile.ZipFile(io.BytesIO(data))
    warc = archive.read("page.warc.gz")
    (tmp_path / "page.warc.gz").write_bytes(warc)
    checked = subprocess.run(
        [sys.executable, "-m", "warcio.cli", "check", str(tmp_path / "page.warc.gz")],
        capture_output=True,
        check=False,
    )
    assert checked.returncode == 0, checked.stdout
    found = {r.rec_type: (r, r.raw_stream.read()) for r in ArchiveIterator(io.BytesIO(warc))}
    response, kept = found["response"]
    assert kept == payload[:CAP]
    assert response.rec_headers.get_header("WARC-Truncated") == "length"
    assert response.rec_headers.get_header("Fptrack-Full-Payload-Length") == str(len(payload))
    assert response.rec_headers.get_header("Fptrack-Full-Payload-Digest") == "sha256:" + sha256_hex(payload)
    info = found["warcinfo"][1].decode()
    assert f"truncated at {CAP} of its {len(payload)} bytes (FPTRACK_EVIDENCE_MAX_PAYLOAD)" in info
    evidence = json.loads(archive.read("evidence.json"))
    assert evidence["warc"]["truncated"]["full_payload_sha256"] == sha256_hex(payload)
    assert evidence["warc"]["truncated"]["kept_bytes"] == CAP

    trusted = public_key_pem(load_signing_key(capped).public_key())
    ca = x509.load_pem_x509_certificate(tsa.ca_cert.read_bytes())
    result = verify_bundle(data, trusted_key=trusted, tsa_cert=ca)
    assert result.ok, result.failure
    lines = "\n".join(result.lines)
    assert f"TRUNCATED at {CAP:,} of its {len(payload):,} bytes (FPTRACK_EVIDENCE_MAX_PAYLOAD)" in lines
    assert sha256_hex(payload) in lines
    if not coded:
        assert "which is the recorded snapshot_sha256" in lines
    assert "capture: sealed " in lines


def test_a_payload_within_the_cap_is_whole(session: Session, settings: Settings) -> None:
    seeded, _ = _flag(session, coded=False)
    data = build_bundle(session, seeded.hostile_match_id, settings)  # the default cap: 100 MiB
    evidence = json.loads(zipfile.ZipFile(io.BytesIO(data)).read("evidence.json"))
    assert "truncated" not in evidence["warc"]
    result = verify_bundle(data)
    assert result.intact, result.failure
    assert "TRUNCATED" not in "\n".join(result.lines)


def test_the_cap_never_passes_what_a_verifier_reads() -> None:
    exchange = _exchange("http://pirate.example/down/book.zip", coded=False)
    from fptrack.storage.match_life import Evidence
    from fptrack.storage.models import Page

    page = Page(url=exchange.url, final_url=exchange.url, host="pirate.example", status=200, encoding="")
    content = Evidence("正文", "", exchange.url, 200, "", exchange.snapshot_sha256, FETCHED, None)
    warc, described = bundle.page_warc(page, content, exchange, max_payload=10**12)
    assert "truncated" not in described
    # room beside the payload for the extracted text (5,000,000 characters, 3 bytes each at most) and the
    # metadata record (bundle.MAX_KEPT_RECORD)
    room = 5_000_000 * 3 + bundle.MAX_KEPT_RECORD
    assert bundle.MAX_EVIDENCE_PAYLOAD + room <= bundle.MAX_WARC_EXPANSION
    warc, described = bundle.page_warc(page, content, exchange, max_payload=CAP)
    records = bundle._read_warc(warc)
    response = records[described["response_record"]]
    bundle._check_truncation(response, described)  # as written: agrees
    for key, wrong in (("full_bytes", 1), ("kept_bytes", CAP - 1), ("full_payload_sha256", "0" * 64)):
        with pytest.raises(BundleError, match="disagree"):
            bundle._check_truncation(
                response, {**described, "truncated": {**described["truncated"], key: wrong}}
            )
    whole, whole_described = bundle.page_warc(page, content, exchange)
    uncut = bundle._read_warc(whole)[whole_described["response_record"]]
    with pytest.raises(BundleError, match="its WARC record does not"):
        bundle._check_truncation(uncut, described)
