"""Removals seen by the site's own crawls (issue 37), against a real loopback site on both backends: a
chapter taken off its table of contents (and answering 404) is fetched by the crawl that sees it go, the next
crawl past ``FPTRACK_RECHECK_CONFIRM_AFTER`` records the takedown, and the summary lists it as down, not as a
copy; a copy taken down and then put back and linked again is fetched and recorded back by the next crawl,
whether its takedown was seen by a crawl (the page stored as 404) or by a re-check (the page row still 200).

The crawls here may confirm a removal :data:`CONFIRM_AFTER` seconds after its first sighting, not the
default's 30 s, which the test only checks is minute-scale: the same story with every default, under
``fptrack worker --beat``, is tests/e2e/test_removal_with_defaults.py."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from fptrack.cli.demo import DEMO_DATA
from fptrack.core.settings import Settings
from fptrack.storage.db import create_engine_for
from fptrack.storage.models import Match, Page
from tests.integration.crawler.test_incremental_recrawl import CHAPTERS, _chapter, _crawl, _fptrack, _toc
from tests.support.live_site import serve_live_site
from tests.support.pirate_site import OTHER, paragraphs_of

pytestmark = pytest.mark.slow

CHAPTER_PATHS = ["/book/0.html", "/book/1.html", "/book/2.html"]
KEPT, NOTICE, GONE = CHAPTER_PATHS
CONFIRM_AFTER = 2.0  # seconds between a removal's first sighting and the crawl that may confirm it
CONFIRMING = {"FPTRACK_RECHECK_CONFIRM_AFTER": str(CONFIRM_AFTER)}


def _match(session: Session, url: str) -> Match:
    match = session.scalars(select(Match).join(Match.page).where(Page.url == url)).one()
    session.expunge(match)
    return match


def test_a_chapter_that_leaves_its_listing_is_recorded_removed_by_the_next_crawls(settings: Settings) -> None:
    defaults = Settings()
    assert defaults.recheck_confirm_after <= 60 and defaults.recheck_young_every <= 600
    assert _fptrack(settings, "works", "add", str(DEMO_DATA / "lighthouse.txt")).returncode == 0
    with serve_live_site() as site:
        site.set(
            "/",
            "<html><body><h1>书站</h1><a href='/book/'>某书</a> <a href='/rank/'>排行</a> "
            "<a href='/full/'>全本</a> <a href='/new/'>新书</a></body></html>",
        )
        for path in ("/rank/", "/full/", "/new/"):
            site.set(path, "<html><body><a href='/'>首页</a></body></html>")
        for number, path in enumerate(CHAPTER_PATHS):
            site.set(path, _chapter(f"第{number}章", CHAPTERS[number].split("\n")))
        _toc(site, CHAPTER_PATHS)
        added = _fptrack(settings, "sites", "add", "books", site.url("/"), "--depth", "2", "--allow-private")
        assert added.returncode == 0, added.stderr
        _crawl(settings, site, **CONFIRMING)
        kept, gone = site.url(KEPT), site.url(GONE)
        engine = create_engine_for(settings)
        try:
            with Session(engine) as session, session.begin():  # neither copy due for hours
                later = datetime.now(UTC) + timedelta(hours=1)
                session.execute(update(Match).values(recheck_due_at=later))

            # the site deletes chapter 2 and takes it off the table of contents; chapter 1 stays linked but
            # now holds a removal notice, and is due for its re-check
            site.remove(GONE)
            _toc(site, CHAPTER_PATHS[:2])
            site.set(NOTICE, _chapter("第1章", ["该章节已删除。", *paragraphs_of(OTHER[0])]))
            with Session(engine) as session, session.begin():
                page_id = session.scalar(select(Page.id).where(Page.url == site.url(NOTICE)))
                due = datetime.now(UTC) - timedelta(seconds=1)
                session.execute(update(Match).where(Match.page_id == page_id).values(recheck_due_at=due))
            second, summary = _crawl(settings, site, **CONFIRMING)
            assert second[GONE] == 1 and second[NOTICE] == 1 and not second[KEPT], second
            notice = site.url(NOTICE)
            assert f"down: {notice} " in summary and f"copy: {notice} " not in summary, summary
            assert "known copies no longer linked, fetched again: 1" in summary, summary
            assert f"down: {gone} " in summary and f"copy: {gone} " not in summary, summary
            with Session(engine) as session:
                seen = _match(session, gone)
                assert seen.down_seen_at is not None and seen.taken_down_at is None  # awaiting confirmation
                assert seen.recheck_state == "gone"

            time.sleep(CONFIRM_AFTER + 0.5)
            third, summary = _crawl(settings, site, **CONFIRMING)
            assert third[GONE] == 1 and not third[KEPT], third
            with Session(engine) as session:
                recorded = _match(session, gone)
                assert recorded.taken_down_at is not None and recorded.taken_down_at == seen.down_seen_at

            # a takedown seen by a re-check leaves the page row at 200: chapter 0, taken down so, still linked
            with Session(engine) as session, session.begin():
                page_id = session.scalar(select(Page.id).where(Page.url == kept))
                now = datetime.now(UTC)
                session.execute(
                    update(Match)
                    .where(Match.page_id == page_id)
                    .values(taken_down_at=now, recheck_state="gone", recheck_due_at=now + timedelta(hours=20))
                )
            # chapter 2 is republished and linked again
            site.set(GONE, _chapter("第2章", CHAPTERS[2].split("\n")))
            _toc(site, CHAPTER_PATHS)
            fourth, summary = _crawl(settings, site, **CONFIRMING)
            assert fourth[KEPT] == 1 and fourth[GONE] == 1, fourth
            assert f"copy: {kept} " in summary and f"copy: {gone} " in summary, summary
            with Session(engine) as session:
                for url in (kept, gone):
                    back = _match(session, url)
                    assert back.taken_down_at is None and back.recheck_state == "present", url
                assert _match(session, gone).id == seen.id  # the same match, recorded back
        finally:
            engine.dispose()
