"""End to end: register -> crawl a real HTTP server on 127.0.0.1 -> fingerprint -> compare -> report.

The site mixes copies of the registered works as pirates publish them (UTF-8, GBK with the charset only in
<meta>, Big5 Traditional, broken HTML, same-sound swaps, edits, a redirect, an excerpt inside news) with pages
that must not match (an unregistered story, unrelated news, a short quotation, a 404). The flagged matches are
checked exactly, on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import random

import pytest

from fptrack.cli.demo import DEMO_DATA, demo_chapters, homophone_swaps, random_edits
from tests.support.sites import Page, Redirect, chapter_page, serve_site

pytestmark = pytest.mark.slow

LIGHT = demo_chapters("lighthouse.txt")
ALLEY = demo_chapters("alley.txt")
OTHER = demo_chapters("rainy_night.txt")
NEWS = (DEMO_DATA / "library_news.txt").read_text("utf-8").split("\n")


def _paragraphs(chapter: str) -> list[str]:
    return [line for line in chapter.split("\n") if line.strip()]


def _site() -> tuple[dict[str, Page | Redirect], dict[str, tuple[str, int]]]:
    rng = random.Random(11)
    links = "".join(
        f'<li><a href="{p}">{p}</a></li>'
        for p in ["/light/1.html", "/light/2.html", "/light/3.html", "/alley/1.html", "/alley/2.html",
                  "/alley/3.html", "/other.html", "/news.html", "/quote.html", "/missing.html", "/excerpt.html"]
    )
    broken = chapter_page("第二回", _paragraphs(ALLEY[1]), template="p-paragraphs").body.decode()
    broken = broken.replace("</p>", "").replace("</div>", "", 2).replace("</body></html>", "<div><span>")
    excerpt = ALLEY[2][40:300]
    pages: dict[str, Page | Redirect] = {
        "/": Page.html(f"<html><body><h1>书友小说网</h1><ul>{links}</ul></body></html>"),
        "/light/1.html": chapter_page("第一章", _paragraphs(LIGHT[0]), template="biquge"),
        "/light/2.html": chapter_page("第二章", _paragraphs(LIGHT[1]), encoding="gbk", header_charset=False),
        "/light/3.html": chapter_page("第三章", _paragraphs(LIGHT[2]), encoding="big5", template="split-divs"),
        "/alley/1.html": chapter_page("第一回", _paragraphs(homophone_swaps(ALLEY[0], 0.25, rng)), template="ad-inside"),
        "/alley/2.html": Page.html(broken),
        "/alley/3.html": Redirect("/alley/3-moved.html"),
        "/alley/3-moved.html": chapter_page("第三回", _paragraphs(random_edits(ALLEY[2], 0.1, rng)), template="html5-article"),
        "/other.html": chapter_page("雨夜来客", _paragraphs(OTHER[0])),
        "/news.html": chapter_page(NEWS[0], NEWS[1:], template="html5-article"),
        "/quote.html": chapter_page("读书笔记", ["最近读到一句话：" + LIGHT[2][200:230], "推荐大家读原著。"]),
        "/excerpt.html": chapter_page("老城区的手艺人", [NEWS[2], "网友转发：" + excerpt, NEWS[3]], template="html5-article"),
    }
    expected = {
        "/light/1.html": ("灯塔守望人", 1),
        "/light/2.html": ("灯塔守望人", 2),
        "/light/3.html": ("灯塔守望人", 3),
        "/alley/1.html": ("青石巷", 1),
        "/alley/2.html": ("青石巷", 2),
        "/alley/3.html": ("青石巷", 3),
        "/excerpt.html": ("青石巷", 3),
    }
    return pages, expected


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
    pages, expected = _site()
    fptrack.run("init")
    added = fptrack.run("works", "add", str(DEMO_DATA / "lighthouse.txt"), str(DEMO_DATA / "alley.txt"))
    assert "registered work #1 '灯塔守望人': 3 chapters" in added.stdout
    with serve_site(pages) as base:
        crawl = fptrack.run("crawl", base + "/", "--allow-private-host", base.key, "--depth", "3", "--max-pages", "50")
        assert {"/other.html", "/missing.html", "/alley/3-moved.html"} <= set(base.requests)
    assert " x 404" in crawl.stdout and "0 failed" in crawl.stdout
    _assert_crawl_recorded(fptrack.settings, pages_seen=int(crawl.stdout.split("crawled ")[1].split(" ")[0]))
    matches = fptrack.matches()
    assert _flagged(matches, base) == expected
    assert len(matches) == len(expected)

    fields = {"page_url", "work_id", "work_title", "chapter_index", "chapter_title", "score", "methods",
              "spans", "first_seen"}
    for match in matches:
        assert set(match) == fields | {"id", "status"}  # the documented fields, then the id and review status
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
    pages, expected = _site()
    fptrack.run("init")
    with serve_site(pages) as base:
        fptrack.run("crawl", base + "/", "--allow-private-host", base.key, "--depth", "3", "--quiet")
    assert fptrack.matches() == []
    added = fptrack.run("works", "add", str(DEMO_DATA / "alley.txt"))
    assert "retroactive check: 4 already-crawled page(s) copy this work" in added.stdout
    found = _flagged(fptrack.matches(), base)
    assert found == {url: wc for url, wc in expected.items() if wc[0] == "青石巷"}


def test_recrawl_keeps_first_seen_and_does_not_duplicate(fptrack) -> None:
    pages, _expected = _site()
    fptrack.run("init")
    fptrack.run("works", "add", str(DEMO_DATA / "lighthouse.txt"))
    with serve_site(pages) as base:
        fptrack.run("crawl", base + "/", "--allow-private-host", base.key, "--depth", "3", "--quiet")
        first = {m["page_url"]: m["first_seen"] for m in fptrack.matches()}
        fptrack.run("crawl", base + "/", "--allow-private-host", base.key, "--depth", "3", "--quiet")
        second = {m["page_url"]: m["first_seen"] for m in fptrack.matches()}
    assert first == second
    assert len(first) == 3
