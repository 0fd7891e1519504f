"""Incremental re-crawls of a managed site (crawler/known.py, crawler/spiders.py) against a real loopback
site, on both backends: a second crawl fetches the entry page, the table of contents and the new chapter
only, not the chapters it stored already; a known chapter whose match is due for a re-check is fetched again;
and the crawl's summary says how many known pages it left alone."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from datetime import UTC, datetime, timedelta

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from fptrack.cli.demo import DEMO_DATA, demo_chapters
from fptrack.core.settings import Settings
from fptrack.storage.db import create_engine_for
from fptrack.storage.models import Match, Page
from testbed.sites import render_chapter
from tests.support.env import clean_environ
from tests.support.live_site import LiveSite, serve_live_site
from tests.support.pirate_site import OTHER, paragraphs_of

CHAPTERS = demo_chapters("lighthouse.txt")


def _fptrack(settings: Settings, *args: str, **environment: str) -> subprocess.CompletedProcess[str]:
    """Run ``fptrack *args`` on the test's database; ``environment`` adds settings (``FPTRACK_...="2"``)."""
    env = clean_environ(
        FPTRACK_DATA_DIR=str(settings.data_dir),
        FPTRACK_DATABASE_URL=settings.database_url,
        FPTRACK_CRAWL_TIMEOUT="5",
        **environment,
    )
    return subprocess.run(
        [sys.executable, "-m", "fptrack.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def _chapter(title: str, paragraphs: list[str]) -> str:
    return render_chapter(title, paragraphs).decode("utf-8")


def _toc(site: LiveSite, paths: list[str]) -> None:
    items = "".join(f"<li><a href='{path}'>第{n}章</a></li>" for n, path in enumerate(paths))
    site.set("/book/", f"<html><head><title>某书目录</title></head><body><ul>{items}</ul></body></html>")


def _crawl(settings: Settings, site: LiveSite, **environment: str) -> tuple[Counter[str], str]:
    """Run the site's crawl; return the paths it requested (robots.txt aside) and its summary."""
    before = len(site.page_requests())
    result = _fptrack(settings, "sites", "run", "books", "--quiet", **environment)
    assert result.returncode == 0, result.stderr + result.stdout
    return Counter(path for path, _ in site.page_requests()[before:]), result.stdout


def test_a_recrawl_fetches_listings_and_new_pages_not_known_chapters(settings: Settings) -> None:
    assert _fptrack(settings, "works", "add", str(DEMO_DATA / "lighthouse.txt")).returncode == 0
    chapters = [f"/book/{n}.html" for n in range(3)]
    with serve_live_site() as site:
        site.set(
            "/",
            "<html><body><h1>书站</h1><a href='/book/'>某书</a> <a href='/rank/'>排行</a> "
            "<a href='/full/'>全本</a> <a href='/new/'>新书</a></body></html>",
        )
        for path in ("/rank/", "/full/", "/new/"):
            site.set(path, "<html><body><a href='/'>首页</a></body></html>")
        for number, path in enumerate(chapters[:2]):
            site.set(path, _chapter(f"第{number}章", CHAPTERS[number].split("\n")))
        site.set(chapters[2], _chapter("雨夜来客", paragraphs_of(OTHER[0])))  # copies nothing registered
        _toc(site, chapters)
        added = _fptrack(settings, "sites", "add", "books", site.url("/"), "--depth", "2", "--allow-private")
        assert added.returncode == 0, added.stderr

        first, _ = _crawl(settings, site)
        assert set(chapters) <= set(first) and first["/book/"] == 1

        engine = create_engine_for(settings)
        try:
            with Session(engine) as session:
                listings = {url: listing for url, listing in session.execute(select(Page.url, Page.listing))}
                assert listings[site.url("/")] and listings[site.url("/book/")]
                assert not any(listings[site.url(path)] for path in chapters)
                assert session.scalar(select(Match.recheck_due_at).limit(1)) is not None  # not due yet

            # a new chapter appears in the table of contents
            new = "/book/3.html"
            site.set(new, _chapter("第2章", CHAPTERS[2].split("\n")))
            _toc(site, [*chapters, new])
            second, summary = _crawl(settings, site)
            assert second["/"] == 1 and second["/book/"] == 1 and second[new] == 1, second
            assert not any(second[path] for path in chapters), second  # known chapters left alone
            # the three chapters, and the three pages of one link each (排行, 全本, 新书: no listings)
            assert "known pages not fetched again: 6" in summary, summary

            # a known chapter whose copy is due for its re-check is fetched by the crawl
            with Session(engine) as session, session.begin():
                page_id = session.scalar(select(Page.id).where(Page.url == site.url(chapters[1])))
                session.execute(
                    update(Match)
                    .where(Match.page_id == page_id)
                    .values(recheck_due_at=datetime.now(UTC) - timedelta(seconds=1))
                )
            third, _ = _crawl(settings, site)
            assert third[chapters[1]] == 1, third
            assert not third[chapters[0]] and not third[chapters[2]] and not third[new], third
        finally:
            engine.dispose()
    # three crawls, seven distinct pages: far fewer requests than three full crawls
    total = sum((first + second + third).values())
    assert total <= 8 + 6 + 4, (first, second, third)


def test_known_pages_are_sorted_once_a_site_has_listings(session: Session, settings: Settings) -> None:
    from fptrack.crawler.known import load_known_pages
    from fptrack.storage.db import session_factory
    from fptrack.storage.models import Site

    site, other = Site(host="a.test", name="a.test"), Site(host="b.test", name="b.test")
    session.add_all([site, other])
    session.flush()

    def page(url: str, *, site_id: int, status: int = 200, error: str = "", listing: bool = False) -> Page:
        return Page(
            url=url,
            final_url=url,
            host="a.test",
            status=status,
            error=error,
            listing=listing,
            site_id=site_id,
            fetched_at=datetime.now(UTC),
        )

    session.add_all(
        [
            page("http://a.test/", site_id=site.id),
            page("http://a.test/1.html", site_id=site.id),
            page("http://a.test/2.html", site_id=site.id, status=503, error="HTTP 503"),
            page("http://b.test/1.html", site_id=other.id),
        ]
    )
    session.commit()
    engine = create_engine_for(settings)
    try:
        sessions = session_factory(engine)
        # stored before pages were told apart (no listing among them): every page is fetched again, once
        known = load_known_pages(sessions, ["a.test"], datetime.now(UTC))
        assert known.total == 3 and known.settled == frozenset()
        session.execute(update(Page).where(Page.url == "http://a.test/").values(listing=True))
        session.commit()
        known = load_known_pages(sessions, ["a.test"], datetime.now(UTC))
        assert known.settled == frozenset({"http://a.test/1.html"})  # not the listing, not the 503
        assert known.fetch("http://a.test/") and known.fetch("http://a.test/2.html")
        assert known.fetch("http://a.test/new.html") and not known.fetch("http://a.test/1.html")
    finally:
        engine.dispose()
