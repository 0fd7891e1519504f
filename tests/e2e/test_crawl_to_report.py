"""End to end: register -> crawl a real HTTP server on 127.0.0.1 -> fingerprint -> compare -> report.

The site mixes copies of the registered works as pirates publish them (UTF-8, GBK with the charset only in
<meta>, Big5 Traditional, broken HTML, same-sound swaps, edits, a redirect, an excerpt inside news) with pages
that must not match (an unregistered story, unrelated news, a short quotation, a 404). The flagged matches are
checked exactly, on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import pytest

from fptrack.cli.demo import DEMO_DATA
from testbed.sites import serve_site
from tests.support.pirate_site import LIGHT, pirate_site

pytestmark = pytest.mark.slow


def _assert_crawl_recorded(settings, *, pages_seen: int) -> None:
    """The crawl is on record: a finished job, and every page tied to it and to its site."""
    from sqlalchemy import select
    from sqlalchemy.orm import Session

    from fptrack.storage.db import create_engine_for
    from fptrack.storage.models import CrawlJob, Page

    engine = create_engine_for(settings)
    try:
        with Session(engine) as session:
            job = session.scalars(select(CrawlJob)).one()
            assert (job.status, job.pages_seen, job.depth, job.max_pages) == ("finished", pages_seen, 3, 50)
            assert job.finished_at is not None and job.site_id is not None
            pages = session.scalars(select(Page)).all()
            assert len(pages) == pages_seen
            assert {(p.crawl_job_id, p.site_id) for p in pages} == {(job.id, job.site_id)}
    finally:
        engine.dispose()


def _flagged(matches: list[dict], base: str) -> dict[str, tuple[str, int]]:
    return {m["page_url"].removeprefix(base): (m["work_title"], m["chapter_index"]) for m in matches}


def test_crawl_finds_exactly_the_copies(fptrack) -> None:
    pages, expected = pirate_site()
    fptrack.run("init")
    added = fptrack.run("works", "add", str(DEMO_DATA / "lighthouse.txt"), str(DEMO_DATA / "alley.txt"))
    assert "registered work #1 '灯塔守望人': 3 chapters" in added.stdout
    with serve_site(pages) as base:
        crawl = fptrack.run(
            "crawl", base + "/", "--allow-private-host", base.key, "--depth", "3", "--max-pages", "50"
        )
        assert {"/other.html", "/missing.html", "/alley/3-moved.html"} <= set(base.requests)
    assert " x 404" in crawl.stdout and "0 failed" in crawl.stdout
    _assert_crawl_recorded(fptrack.settings, pages_seen=int(crawl.stdout.split("crawled ")[1].split(" ")[0]))
    matches = fptrack.matches()
    assert _flagged(matches, base) == expected
    assert len(matches) == len(expected)

    fields = {
        "page_url",
        "work_id",
        "work_title",
        "chapter_index",
        "chapter_title",
        "score",
        "methods",
        "spans",
        "first_seen",
        "kind",
        "alignment",
    }
    for match in matches:
        assert set(match) == fields | {"id", "status"}  # the documented fields, then the id and review status
        # every copy here keeps the original's characters: none is a meaning copy (README, "Match JSON")
        assert match["kind"] is None and match["alignment"] is None
        assert match["status"] == "flagged"
        assert 0 < match["score"] <= 1
        assert match["methods"]
        assert match["spans"] and all(len(span) == 4 for span in match["spans"])
    # spans point into the original texts: the copied characters of a verbatim copy are the work's characters
    light1 = next(m for m in matches if m["page_url"].endswith("/light/1.html"))
    work_text = (DEMO_DATA / "lighthouse.txt").read_text("utf-8")
    _, _, work_start, work_end = max(light1["spans"], key=lambda s: s[1] - s[0])
    assert work_end - work_start > 200
    assert work_text[work_start:work_end].strip() in LIGHT[0]
    # the excerpt is localised: its span covers the quoted passage, not the whole chapter
    excerpt = next(m for m in matches if m["page_url"].endswith("/excerpt.html"))
    covered = sum(s[3] - s[2] for s in excerpt["spans"])
    assert 200 <= covered <= 300


def test_registering_a_work_finds_pages_crawled_before(fptrack) -> None:
    pages, expected = pirate_site()
    fptrack.run("init")
    with serve_site(pages) as base:
        fptrack.run("crawl", base + "/", "--allow-private-host", base.key, "--depth", "3", "--quiet")
    assert fptrack.matches() == []
    added = fptrack.run("works", "add", str(DEMO_DATA / "alley.txt"))
    assert "retroactive check: 4 already-crawled page(s) copy this work" in added.stdout
    found = _flagged(fptrack.matches(), base)
    assert found == {url: wc for url, wc in expected.items() if wc[0] == "青石巷"}


def test_recrawl_keeps_first_seen_and_does_not_duplicate(fptrack) -> None:
    pages, _expected = pirate_site()
    fptrack.run("init")
    fptrack.run("works", "add", str(DEMO_DATA / "lighthouse.txt"))
    with serve_site(pages) as base:
        fptrack.run("crawl", base + "/", "--allow-private-host", base.key, "--depth", "3", "--quiet")
        first = {m["page_url"]: m["first_seen"] for m in fptrack.matches()}
        fptrack.run("crawl", base + "/", "--allow-private-host", base.key, "--depth", "3", "--quiet")
        second = {m["page_url"]: m["first_seen"] for m in fptrack.matches()}
    assert first == second
    assert len(first) == 3
