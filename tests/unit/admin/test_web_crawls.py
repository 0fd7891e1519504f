"""``/crawls``: crawl runs with their site and outcome; crawled strings escaped."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy.orm import Session

from fptrack.admin.web import create_app
from fptrack.core.settings import Settings
from fptrack.storage.models import Chapter, CrawlJob, Match, Page, Site, Work
from tests.support.accounts import add_account, log_in


@pytest.fixture
def client(settings: Settings) -> Iterator[FlaskClient]:
    app: Flask = create_app(settings)
    add_account(settings, "vera", "viewer")
    client = app.test_client()
    log_in(client, "vera")
    yield client
    app.extensions["fptrack"].engine.dispose()


def _seed(session: Session) -> tuple[int, int]:
    site = Site(host="pirate.test", name="pirate.test")
    session.add(site)
    session.flush()
    done = CrawlJob(
        site_id=site.id,
        start_urls=["http://pirate.test/"],
        depth=2,
        max_pages=50,
        status="finished",
        started_at=datetime(2026, 1, 1, tzinfo=UTC),
        finished_at=datetime(2026, 1, 1, 0, 5, tzinfo=UTC),
        pages_seen=3,
        pages_failed=0,
        copies_found=2,  # what the crawl service records when the crawl ends
    )
    failed = CrawlJob(
        site_id=site.id,
        start_urls=["http://pirate.test/<script>alert(1)</script>"],
        depth=1,
        max_pages=5,
        status="failed",
        started_at=datetime(2026, 1, 2, tzinfo=UTC),
        error="cannot crawl: <b>connection refused</b>",
    )
    session.add_all([done, failed])
    work = Work(title="书", content_sha256="a" * 64, text="x" * 20)
    session.add(work)
    session.flush()
    chapter = Chapter(work_id=work.id, index=1, title="第一章", start=0, end=20, text="x" * 20)
    pages = [
        Page(
            url=f"http://pirate.test/{n}",
            final_url="",
            host="pirate.test",
            status=200,
            site_id=site.id,
            crawl_job_id=done.id,
        )
        for n in range(3)
    ]
    session.add_all([chapter, *pages])
    session.flush()
    for page in pages[:2]:
        session.add(Match(page_id=page.id, work_id=work.id, chapter_id=chapter.id, score=0.9))
    session.commit()
    return done.id, failed.id


def test_crawls_list_newest_first_with_copies_counted_and_markup_escaped(
    client: FlaskClient, session: Session
) -> None:
    done_id, failed_id = _seed(session)
    html = client.get("/crawls").get_data(as_text=True)
    assert html.index(f'id="crawl-{failed_id}"') < html.index(f'id="crawl-{done_id}"')
    row = html[html.index(f'id="crawl-{done_id}"') :].split("</tr>")[0]
    assert "pirate.test" in row and "3 / 50" in row and '<td class="num">2</td>' in row and "finished" in row
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;" in html
    assert "<b>connection refused</b>" not in html and "&lt;b&gt;connection refused&lt;/b&gt;" in html


def test_no_crawls_yet(client: FlaskClient) -> None:
    assert "No crawls yet" in client.get("/crawls").get_data(as_text=True)
