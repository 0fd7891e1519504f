"""A distributed crawl (scrapy-redis frontier, pickled requests) reads a chapter drawn as images as a local
crawl does: the image requests carry the waiting page through Redis, and the stored page's text is the
chapter read by OCR."""

from __future__ import annotations

import difflib
import unicodedata

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from fptrack.core.settings import Settings
from fptrack.fingerprint.ocr import tesseract_path
from fptrack.storage.db import create_engine_for
from fptrack.storage.models import Page
from testbed.images import chapter_png
from testbed.sites import Page as SitePage
from testbed.sites import serve_site
from tests.conftest import REDIS_URL
from tests.integration.crawler.test_distributed_crawl import (  # noqa: F401 - crawl_redis: a fixture
    _crawl_command,
    _env,
    _finish,
    _start,
    crawl_redis,
)
from tests.support.books import book

pytestmark = [
    pytest.mark.slow,
    pytest.mark.redis,
    pytest.mark.postgres,
    pytest.mark.usefixtures("crawl_redis"),
    pytest.mark.skipif(tesseract_path() is None, reason="deploy/ensure-services.sh installs tesseract"),
]

CHAPTER = book(301, 1, length=400).split("\n", 2)[2]


def test_a_distributed_crawl_reads_a_chapter_drawn_as_images(postgres_settings: Settings) -> None:
    lines = CHAPTER.splitlines()
    pages = {
        "/": SitePage.html("<html><body><h1>目录</h1><a href='/c/1.html'>第一章</a></body></html>"),
        "/c/1.html": SitePage.html(
            "<html><body><h1>第一章</h1><div id='content'><img src='/i/1.png'><img src='/i/2.png'></div>"
            "<a href='/'>目录</a></body></html>"
        ),
        "/i/1.png": SitePage(chapter_png("\n".join(lines[:1])), content_type="image/png"),
        "/i/2.png": SitePage(chapter_png("\n".join(lines[1:])), content_type="image/png"),
    }
    env = _env(postgres_settings, FPTRACK_CRAWL_REDIS_URL=REDIS_URL)
    with serve_site(pages) as base:
        code, out, err = _finish(_start(_crawl_command(base, "--depth", "1", "--max-pages", "10"), env))
        assert code == 0, f"{out}\n{err}"
    engine = create_engine_for(postgres_settings)
    try:
        with Session(engine) as session:
            page = session.scalars(select(Page).where(Page.url == base + "/c/1.html")).one()
            text, note = page.text, page.note
    finally:
        engine.dispose()
    assert note.startswith("images: 2 of 2 image(s) read by OCR"), note
    # compared as matching compares: full-width and ASCII punctuation alike (NFKC)
    read, expected = (unicodedata.normalize("NFKC", "".join(t.split())) for t in (text, CHAPTER))
    assert difflib.SequenceMatcher(None, read, expected, autojunk=False).ratio() >= 0.9, text
