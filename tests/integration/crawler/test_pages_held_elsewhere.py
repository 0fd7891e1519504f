"""Two crawls with tasks in-process that meet one page at once both hand it on to compare; the one that comes
second finds it held by the other's transaction (``SKIP LOCKED``). It must not report the crawl before that
page is compared: it waits for the other to commit, or compares the page itself once the other is gone (a
rolled-back or killed holder releases its lock). Here the other crawl is a second session that locks the
pages, as process_pages does."""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from fptrack.cli.demo import DEMO_DATA
from fptrack.compare import service as compare_service
from fptrack.compare.service import index_work
from fptrack.compare.works import register_work_file
from fptrack.core.settings import Settings
from fptrack.crawler.pages import CrawledPage
from fptrack.crawler.store import PageStore
from fptrack.jobs import tasks
from fptrack.jobs.crawls import _compare_the_rest, _copies, _Dispatcher, _pending
from fptrack.storage.db import create_engine_for, session_factory
from fptrack.storage.models import Chapter, Page

pytestmark = pytest.mark.postgres


@pytest.fixture
def sessions(postgres_settings: Settings) -> Iterator[sessionmaker[Session]]:
    tasks.configure(postgres_settings)  # tasks in-process: process_pages.delay runs in this thread
    engine = create_engine_for(postgres_settings)
    yield session_factory(engine)
    engine.dispose()


def _stored_copies(sessions: sessionmaker[Session], settings: Settings) -> tuple[PageStore, _Dispatcher]:
    """Register the demo's lighthouse work and store three pages that copy its chapters, none compared yet."""
    with sessions.begin() as session:
        work = register_work_file(session, DEMO_DATA / "lighthouse.txt")
        index_work(session, work.work_id, settings)
        chapters = list(session.scalars(select(Chapter.text).order_by(Chapter.id).limit(3)))
    dispatcher = _Dispatcher(settings, tasks)
    store = PageStore(sessions, job_id=None, dispatch=lambda ids: None, settings=settings)  # handed to nobody
    for number, chapter in enumerate(chapters):
        body = f"盗版小说网 首页 排行 书架\n{chapter}\n上一章 目录 下一章"
        store.add(
            CrawledPage(
                url=f"http://127.0.0.1:9/{number}.html",
                final_url=f"http://127.0.0.1:9/{number}.html",
                status=200,
                encoding="utf-8",
                title=f"第{number}章",
                text=body,
                content_sha256=hashlib.sha256(body.encode()).hexdigest(),
                snapshot_sha256="",
                fetched_at=datetime.now(UTC),
            )
        )
    store.flush()
    assert len(_pending(sessions, store.counts.page_ids)) == 3
    return store, dispatcher


def _hold(
    sessions: sessionmaker[Session],
    page_ids: set[int],
    held: threading.Event,
    *,
    compare: bool,
    settings: Settings,
) -> None:
    """The other crawl: lock the pages, keep them a moment, then compare them and commit (or give up: roll
    back)."""
    with sessions() as session:
        session.execute(select(Page.id).where(Page.id.in_(page_ids)).with_for_update())
        held.set()
        time.sleep(1.5)  # the other crawl's compare takes a while
        if compare:
            compare_service.process_pages(session, sorted(page_ids), settings)
            session.commit()
        else:
            session.rollback()


@pytest.mark.parametrize("holder_commits", [True, False], ids=["holder-compares", "holder-gone"])
def test_a_crawl_reports_the_copies_of_pages_another_crawl_was_comparing(
    sessions: sessionmaker[Session], postgres_settings: Settings, holder_commits: bool
) -> None:
    store, dispatcher = _stored_copies(sessions, postgres_settings)
    held = threading.Event()
    other = threading.Thread(
        target=_hold,
        args=(sessions, store.counts.page_ids, held),
        kwargs={"compare": holder_commits, "settings": postgres_settings},
    )
    other.start()
    try:
        assert held.wait(10)
        # what the crawl's own batch did: every page taken, none done
        dispatcher(sorted(store.counts.page_ids))
        assert len(_pending(sessions, store.counts.page_ids)) == 3
        _compare_the_rest(sessions, postgres_settings, store, dispatcher)
        # read as the crawl reads its outcome, right after: not after the other crawl was waited for here
        assert _pending(sessions, store.counts.page_ids) == []
        # every copy reported, by whoever compared it
        copies, seen_down = _copies(sessions, store.counts.page_ids)
        assert len(copies) == 3 and seen_down == []
    finally:
        other.join(30)
