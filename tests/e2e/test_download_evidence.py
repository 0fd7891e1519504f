"""End to end: a zipped book of 300 KB served at two URLs (two mirrors of one file) is found at both, its
member named (``fptrack matches`` JSON ``files``); its bytes are kept once (one ``blobs`` row); its evidence
bundle holds the zip as served as the WARC response payload, and with FPTRACK_EVIDENCE_MAX_PAYLOAD below its
size a bundle cut at the cap that ``fptrack evidence verify`` accepts and calls truncated."""

from __future__ import annotations

import io
import os
import zipfile
from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session
from warcio.archiveiterator import ArchiveIterator

from fptrack.storage.db import create_engine_for
from fptrack.storage.models import Blob
from testbed.sites import Page, serve_site
from tests.e2e.conftest import Fptrack
from tests.support.books import book

pytestmark = pytest.mark.slow

BOOK = book(111, 6, title="灯下长卷")
MEMBER = "全本/灯下长卷.txt"


def _zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr(MEMBER, BOOK.encode("utf-8"), zipfile.ZIP_DEFLATED)
        archive.writestr("封面.jpg", os.urandom(300 * 1024), zipfile.ZIP_STORED)
    return buffer.getvalue()


def _payloads(bundle: Path) -> list[bytes]:
    archive = zipfile.ZipFile(io.BytesIO(bundle.read_bytes()))
    return [
        record.raw_stream.read()
        for record in ArchiveIterator(io.BytesIO(archive.read("page.warc.gz")))
        if record.rec_type == "response"
    ]


def test_two_mirrors_of_one_archive(fptrack: Fptrack, tmp_path: Path) -> None:
    data = _zip()
    links = '<a href="/m1/book.zip">1</a> <a href="/m2/down?id=7">2</a>'
    pages = {
        "/": Page.html(f"<html><body>{links}</body></html>"),
        "/m1/book.zip": Page(data, content_type="application/zip"),
        "/m2/down?id=7": Page(data, content_type="application/octet-stream"),
    }
    fptrack.run("init")
    (tmp_path / "book.txt").write_text(BOOK, encoding="utf-8")
    fptrack.run("works", "add", str(tmp_path / "book.txt"))
    with serve_site(pages) as base:
        fptrack.run("crawl", base + "/", "--allow-private-host", base.key, "--depth", "1")
    matches = fptrack.matches()
    urls = {match["page_url"].removeprefix(base) for match in matches}
    assert urls == {"/m1/book.zip", "/m2/down?id=7"}
    assert {tuple(match["files"]) for match in matches} == {(MEMBER,)}

    engine = create_engine_for(fptrack.settings)
    try:
        with Session(engine) as session:
            assert session.scalar(select(func.count()).select_from(Blob)) == 1
            assert session.scalar(select(Blob.size)) == len(data)
    finally:
        engine.dispose()

    match_id = str(matches[0]["id"])
    whole = tmp_path / "whole.zip"
    fptrack.run("evidence", "bundle", "--match", match_id, "-o", str(whole))
    assert _payloads(whole) == [data]

    cut = tmp_path / "cut.zip"
    fptrack.extra_env["FPTRACK_EVIDENCE_MAX_PAYLOAD"] = str(64 * 1024)
    fptrack.run("evidence", "bundle", "--match", match_id, "-o", str(cut))
    assert _payloads(cut) == [data[: 64 * 1024]]
    verified = fptrack.run("evidence", "verify", str(cut), check=False)
    assert f"TRUNCATED at 65,536 of its {len(data):,} bytes" in verified.stdout, verified.stdout
    assert "which is the recorded snapshot_sha256" in verified.stdout
