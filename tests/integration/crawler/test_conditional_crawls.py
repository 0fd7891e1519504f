"""Conditional re-crawls against a loopback server that honours ETag / Last-Modified, on SQLite and
PostgreSQL: the second crawl sends the validators back, gets 304s and fingerprints nothing; after an edit the
page is fetched in full and compared again, its match kept (same match, same first seen)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.orm import Session

from fptrack.cli.demo import DEMO_DATA, demo_chapters
from fptrack.core.settings import Settings
from fptrack.storage.db import create_engine_for
from fptrack.storage.models import CrawlJob, Fingerprint, Match, Page
from testbed.sites import render_chapter
from tests.support.env import clean_environ
from tests.support.live_site import serve_live_site

CHAPTERS = demo_chapters("lighthouse.txt")
PATHS = [f"/c/{n}.html" for n in range(3)]
EXTRA = "他推开木门，海风裹着咸味扑面而来，远处的灯塔一明一灭，像是在和他打招呼。"  # written for this test


def _markup(title: str, paragraphs: list[str]) -> str:
    return render_chapter(title, paragraphs).decode("utf-8")


def _fptrack(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    env = clean_environ()
    env.update(
        FPTRACK_DATA_DIR=str(settings.data_dir),
        FPTRACK_DATABASE_URL=settings.database_url,
        FPTRACK_CRAWL_TIMEOUT="5",
    )
    return subprocess.run(
        [sys.executable, "-m", "fptrack.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def _state(settings: Settings) -> dict[str, tuple[object, ...]]:
    """url path -> (compared_at, fingerprinted_at, fetched_at, etag)."""
    engine = create_engine_for(settings)
    try:
        with Session(engine) as session:
            rows = session.execute(
                select(Page.url, Page.compared_at, Page.fingerprinted_at, Page.fetched_at, Page.etag)
            )
            return {url.split("/", 3)[3]: tuple(rest) for url, *rest in rows}
    finally:
        engine.dispose()


def _query(settings: Settings, statement: object) -> list[object]:
    engine = create_engine_for(settings)
    try:
        with Session(engine) as session:
            return list(session.execute(statement).all())  # type: ignore[call-overload]
    finally:
        engine.dispose()


def test_second_crawl_gets_304s_and_an_edit_is_compared_again(settings: Settings, tmp_path: Path) -> None:
    assert _fptrack(settings, "works", "add", str(DEMO_DATA / "lighthouse.txt")).returncode == 0
    with serve_live_site() as site:
        site.set("/", "".join(f'<a href="{path}">{path}</a> ' for path in PATHS))
        for number, path in enumerate(PATHS):
            site.set(path, _markup(f"第{number}章", CHAPTERS[number].split("\n")))

        def crawl() -> subprocess.CompletedProcess[str]:
            result = _fptrack(
                settings, "crawl", site.url("/"), "--depth", "1", "--quiet", "--allow-private-host", site.key
            )
            assert result.returncode == 0, result.stderr
            return result

        crawl()
        first = _state(settings)
        assert all(first[path.lstrip("/")][3] for path in PATHS)  # ETags stored
        matches_before = {
            tuple(r) for r in _query(settings, select(Match.id, Match.page_id, Match.first_seen))
        }
        fingerprints_before = {
            tuple(r) for r in _query(settings, select(Fingerprint.id, Fingerprint.created_at))
        }
        assert len(matches_before) == 3

        crawl()
        second = _state(settings)
        for path in PATHS:
            sent = [h for p, h in site.requests if p == path][-1]
            assert sent.get("if-none-match") == first[path.lstrip("/")][3]
            assert site.statuses(path)[-1] == 304
        assert [h for p, h in site.requests if p == "/"][-1].get("if-none-match") is None  # links are needed
        for path in PATHS:
            before, after = first[path.lstrip("/")], second[path.lstrip("/")]
            assert after[:2] == before[:2]  # not fingerprinted, not compared again
            assert after[2] > before[2]  # fetched again
        assert {
            tuple(r) for r in _query(settings, select(Fingerprint.id, Fingerprint.created_at))
        } == fingerprints_before
        jobs = [row[0] for row in _query(settings, select(CrawlJob).order_by(CrawlJob.id))]
        # the three chapters unchanged; the table of contents (no main text) is stored again, as on every
        # crawl
        assert (jobs[1].pages_unchanged, jobs[1].pages_stored) == (3, 1), jobs[1].stats  # type: ignore[attr-defined]
        assert jobs[1].stats["by_status"] == {"200": 1, "304": 3}  # type: ignore[attr-defined]
        assert jobs[1].copies_found == 3  # type: ignore[attr-defined]

        site.set(PATHS[1], _markup("第1章", [*CHAPTERS[1].split("\n"), EXTRA]))  # still a copy
        crawl()
        third = _state(settings)
        edited = PATHS[1].lstrip("/")
        # compared again
        assert third[edited][0] > second[edited][0] and third[edited][3] != second[edited][3]
        assert third[PATHS[0].lstrip("/")][:2] == second[PATHS[0].lstrip("/")][:2]
        assert site.statuses(PATHS[1])[-1] == 200
        assert {
            tuple(r) for r in _query(settings, select(Match.id, Match.page_id, Match.first_seen))
        } == matches_before


def test_a_sites_validators_are_read_at_once_and_only_its_own(settings: Settings) -> None:
    """What the conditional requests of a crawl read when they first meet a site: its pages stored from a 200
    with an ETag or a Last-Modified, the same pairs the per-page read gives; none past the limit (then the
    requests ask page by page)."""
    from fptrack.crawler.pages import CrawledPage
    from fptrack.crawler.store import PageStore
    from fptrack.storage.db import session_factory
    from fptrack.storage.models import utcnow
    from fptrack.storage.sites import site_of

    def fetch(url: str, status: int = 200, etag: str = "", modified: str = "") -> CrawledPage:
        return CrawledPage(
            url=url,
            final_url=url,
            status=status,
            encoding="utf-8",
            title="",
            text=url * 3,
            content_sha256=url,
            snapshot_sha256=url,
            fetched_at=utcnow(),
            etag=etag,
            last_modified=modified,
        )

    engine = create_engine_for(settings)
    try:
        store = PageStore(session_factory(engine), job_id=None, dispatch=lambda ids: None, settings=settings)
        a, b = "http://a.pirate.test", "http://b.pirate.test:8080"
        for page in (
            fetch(f"{a}/1.html", etag='"one"'),
            fetch(f"{a}/2.html", modified="Tue, 24 Nov 2026 08:00:00 GMT"),
            fetch(f"{a}/3.html"),  # no validators
            fetch(f"{a}/4.html", status=404, etag='"gone"'),  # not a 200: nothing to send back
            fetch(f"{b}/1.html", etag='"other site"'),
        ):
            store.add(page)
        store.flush()
        known = store.site_validators(site_of(f"{a}/"), 10)
        assert known == {
            f"{a}/1.html": ('"one"', ""),
            f"{a}/2.html": ("", "Tue, 24 Nov 2026 08:00:00 GMT"),
        }
        assert all(store.validators(url) == pair for url, pair in known.items())
        assert store.validators(f"{a}/3.html") == ("", "")
        assert store.site_validators(site_of(f"{b}/"), 10) == {f"{b}/1.html": ('"other site"', "")}
        assert store.site_validators(site_of(f"{a}/"), 1) is None  # more than the limit: page by page
        assert store.site_validators("never.crawled.test", 10) == {}
    finally:
        engine.dispose()
