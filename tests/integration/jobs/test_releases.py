"""Release pacing against a real database: a release brings the next crawl of the sites that copied the work
to 30 s after it, the scheduler keeps them on a 30-second grid for the window and backs off after it (both
backends); a release feed served on loopback is read through the guarded client and hastens the site, once
per entry; ``fptrack works add --release-of`` and ``fptrack works releases --feed`` (SQLite, the real CLI)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from itertools import pairwise
from pathlib import Path

import pytest
from sqlalchemy import select, update
from sqlalchemy.orm import Session, sessionmaker

from fptrack.core.settings import Settings
from fptrack.jobs.releases import ReleasePace, read_due_feeds, release_work
from fptrack.jobs.sites import SiteSpec, add_site, due_sites, record_crawl_result
from fptrack.storage.db import create_engine_for
from fptrack.storage.models import Chapter, Match, Page, Release, ReleaseFeed, Site, Work, as_utc, utcnow
from fptrack.storage.releases import set_feed
from tests.support.books import book
from tests.support.cli import fptrack

T0 = datetime(2026, 11, 29, 9, 0, tzinfo=UTC)
PACE = ReleasePace(window=3600, every=30, tick=30, backoff_max=4)


def _copied_site(session: Session, name: str, *, copies: bool, status: str = "flagged") -> Site:
    """A monitored site on a 2-minute schedule, holding a page that copies work 1 when ``copies``."""
    site = add_site(session, SiteSpec(name, (f"http://{name}.test/",), schedule="120"), now=T0)
    site.next_crawl_at = T0 + timedelta(seconds=100)
    if copies:
        work = session.scalar(select(Work).order_by(Work.id))
        assert work is not None
        page = Page(url=f"http://{name}.test/1.html", final_url=f"http://{name}.test/1.html",
                    host=site.host, status=200, text="copy", site_id=site.id)  # fmt: skip
        session.add(page)
        session.flush()
        found = T0 - timedelta(days=1)  # before the releases: not a repost
        session.add(Match(page_id=page.id, work_id=work.id, chapter_id=work.chapters[0].id, score=0.9,
                          methods=["winnowing"], spans=[], status=status, first_seen=found))  # fmt: skip
    session.flush()
    return site


def _work(session: Session) -> Work:
    work = Work(title="灯塔", source_name="a.txt", content_sha256="c" * 64, text="第一章 灯塔\n海风")
    work.chapters.append(Chapter(index=1, title="第一章 灯塔", start=0, end=9, text="第一章 灯塔\n海风"))
    session.add(work)
    session.flush()
    return work


def _due(site: Site) -> datetime:
    session = Session.object_session(site)
    assert session is not None
    session.refresh(site)
    assert site.next_crawl_at is not None
    return as_utc(site.next_crawl_at)


def test_a_release_hastens_the_copiers_then_a_30_second_grid_then_a_back_off(session: Session) -> None:
    work = _work(session)
    copier = _copied_site(session, "copier", copies=True)
    bystander = _copied_site(session, "bystander", copies=False)
    dismissed = _copied_site(session, "dismissed", copies=True, status="dismissed")

    released = release_work(session, work.id, released_at=T0, source="registration", ref="work:2",
                            pace=PACE, now=T0)  # fmt: skip
    assert released.recorded and released.sites == [copier.id]
    assert _due(copier) == T0 + timedelta(seconds=30)  # was due at +100
    assert _due(bystander) == _due(dismissed) == T0 + timedelta(seconds=100)
    again = release_work(session, work.id, released_at=T0, source="registration", ref="work:2", pace=PACE)
    assert not again.recorded

    starts = []
    moment = T0
    while moment < T0 + timedelta(minutes=5):
        started = [n for _, n in due_sites(session, now=moment, tick=30, pace=PACE)]
        if "copier" in started:
            starts.append(moment)
            # a crawl that found nothing keeps the release pace (the quiet back-off waits for the window)
            record_crawl_result(session, copier.id, found=False, scheduled=True, started_at=moment,
                                now=moment, pace=PACE)  # fmt: skip
        moment += timedelta(seconds=30)
    assert starts[0] == T0 + timedelta(seconds=30)
    assert [(b - a).total_seconds() for a, b in pairwise(starts)] == [30.0] * 8

    # the copier posts the released chapter: nothing more to wait for, its schedule (stretched) again
    reposted = Page(url="http://copier.test/2.html", final_url="http://copier.test/2.html", host=copier.host,
                    status=200, text="copy", site_id=copier.id)  # fmt: skip
    session.add(reposted)
    session.flush()
    session.add(Match(page_id=reposted.id, work_id=work.id, chapter_id=work.chapters[0].id, score=0.9,
                      methods=["winnowing"], spans=[], status="flagged", first_seen=moment))  # fmt: skip
    copier.next_crawl_at = moment
    session.flush()
    assert "copier" in [n for _, n in due_sites(session, now=moment, tick=30, pace=PACE)]
    assert _due(copier) - moment >= timedelta(seconds=120)

    # past the window: the next due time is further than the schedule (quiet crawls and the release back-off)
    after = T0 + timedelta(hours=1, seconds=30)
    copier.next_crawl_at = after
    session.flush()
    assert "copier" in [n for _, n in due_sites(session, now=after, tick=30, pace=PACE)]
    assert _due(copier) - after > timedelta(seconds=120)
    # a site that copied only a released chapter (a work registered --release-of) follows the work too
    chapter = Work(title="灯塔 第二章", source_name="b.txt", content_sha256="d" * 64, text="第二章\n浪")
    chapter.chapters.append(Chapter(index=1, title="第二章", start=0, end=5, text="第二章\n浪"))
    session.add(chapter)
    session.flush()
    session.execute(update(Release).values(new_work_id=chapter.id))
    late = _copied_site(session, "late", copies=False)
    late.next_crawl_at = after + timedelta(seconds=100)
    page = Page(url="http://late.test/2.html", final_url="http://late.test/2.html", host=late.host,
                status=200, text="copy", site_id=late.id)  # fmt: skip
    session.add(page)
    session.flush()
    session.add(Match(page_id=page.id, work_id=chapter.id, chapter_id=chapter.chapters[0].id, score=0.9,
                      methods=["winnowing"], spans=[], status="flagged", first_seen=T0))  # fmt: skip
    session.flush()
    next_one = release_work(
        session, work.id, released_at=after, source="feed", ref="ch-3", pace=PACE, now=after
    )
    assert sorted(next_one.sites) == sorted([copier.id, late.id])
    assert _due(late) == after + timedelta(seconds=30)

    # release pacing off: the same site keeps its schedule
    copier.next_crawl_at, copier.quiet_crawls = after, 0
    session.flush()
    due_sites(session, now=after, tick=30, pace=ReleasePace(window=0))
    assert _due(copier) - after <= timedelta(seconds=120)


class _Feed(BaseHTTPRequestHandler):
    body = b""
    status = 200

    def do_GET(self) -> None:
        self.send_response(self.status)
        self.send_header("Content-Type", "application/rss+xml")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def feed_server() -> Iterator[tuple[str, type[_Feed]]]:
    handler = type("Feed", (_Feed,), {})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.server_address[1]}", handler
    server.shutdown()
    server.server_close()


def _rss(*items: tuple[str, datetime]) -> bytes:
    entries = "".join(
        f"<item><title>{ref}</title><guid>{ref}</guid><pubDate>{format_datetime(at)}</pubDate></item>"
        for ref, at in items
    )
    return f"<?xml version='1.0'?><rss version='2.0'><channel>{entries}</channel></rss>".encode()


def test_a_release_feed_on_loopback_hastens_the_next_crawl(
    sqlite_settings: Settings, feed_server: tuple[str, type[_Feed]]
) -> None:
    host, handler = feed_server
    settings = replace(sqlite_settings, allow_private_hosts=(host,), crawl_obey_robots=False)
    engine = create_engine_for(settings)
    sessions = sessionmaker(bind=engine, expire_on_commit=False)
    now = utcnow()
    try:
        with sessions.begin() as session:
            work = _work(session)
            site = _copied_site(session, "copier", copies=True)
            site.next_crawl_at = now + timedelta(seconds=100)
            set_feed(session, work.id, f"http://{host}/feed.xml")
        handler.body = _rss(("ch-41", now - timedelta(seconds=5)), ("ch-40", now - timedelta(days=2)))
        counts = read_due_feeds(settings, sessions, now=now)
        assert counts == {"feeds": 1, "failed": 0, "releases": 2, "sites": 1}
        with sessions() as session:
            site = session.scalars(select(Site).where(Site.name == "copier")).one()
            # 30 s after the release (to the second of the feed's date), not the 100 s it was due in
            assert now + timedelta(seconds=24) <= _due(site) <= now + timedelta(seconds=26)
            feed = session.get(ReleaseFeed, work.id)
            assert feed is not None and feed.error == "" and feed.next_check_at is not None
        # read again: the same entries are no new releases; a feed that fails keeps its error
        assert read_due_feeds(settings, sessions, now=now + timedelta(seconds=61))["releases"] == 0
        handler.status, handler.body = 404, b"gone"
        assert read_due_feeds(settings, sessions, now=now + timedelta(seconds=122))["failed"] == 1
        with sessions() as session:
            feed = session.get(ReleaseFeed, 1)
            assert feed is not None and "HTTP 404" in feed.error
            assert session.scalar(select(Release.ref).where(Release.ref == "ch-41")) == "ch-41"
    finally:
        engine.dispose()


@pytest.mark.slow  # four command-line runs, two of them registering works: about 20 s on an idle machine
def test_works_add_release_of_and_works_releases_on_the_command_line(sqlite_settings: Settings) -> None:
    tmp = Path(sqlite_settings.data_dir).parent
    env = {"FPTRACK_DATABASE_URL": sqlite_settings.database_url}
    first, chapter = tmp / "book.txt", tmp / "ch41.txt"
    first.write_text(book(1, 2), encoding="utf-8")
    chapter.write_text(book(2, 1), encoding="utf-8")
    assert fptrack(tmp, "works", "add", str(first), "--title", "灯塔", **env).returncode == 0
    added = fptrack(tmp, "works", "add", str(chapter), "--release-of", "1", **env)
    assert added.returncode == 0, added.stderr
    assert "release of work #1: 0 monitored site(s) that copied it crawled every 30 s" in added.stdout
    shown = fptrack(tmp, "works", "releases", "1", "--feed", "https://pub.example/feed.xml", **env)
    assert shown.returncode == 0, shown.stderr
    assert "release feed: https://pub.example/feed.xml (not read yet" in shown.stdout
    assert "registration" in shown.stdout and "work:2" in shown.stdout
    wrong = fptrack(tmp, "works", "add", str(chapter), "--release-of", "9", **env)
    assert wrong.returncode != 0 and "error: --release-of 9: there is no work with that id" in wrong.stderr
