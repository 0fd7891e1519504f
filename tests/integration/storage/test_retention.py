"""Retention of pages gone for good: their fingerprints go, what a match, a review or a takedown
rests on stays; pages still up or gone only lately keep everything. SQLite and PostgreSQL."""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from fptrack.compare.service import process_pages
from fptrack.core.settings import Settings
from fptrack.crawler.pages import CrawledPage
from fptrack.crawler.store import PageStore
from fptrack.storage.db import create_engine_for, session_factory, session_scope
from fptrack.storage.fingerprints import load_page_codes
from fptrack.storage.housekeeping import count_orphans, retire_page_fingerprints
from fptrack.storage.match_life import GONE_STATUSES
from fptrack.storage.models import Chapter, Fingerprint, Match, Page, PageVersion, Work, as_utc, utcnow

TEXT = "他们一路向西走去，翻过了七座高山，渡过了九条大河，终于来到了那座传说中的古城门前。" * 12


def _page(session: Session, number: int, *, status: int, days_ago: float) -> Page:
    fetched = utcnow() - timedelta(days=days_ago)
    page = Page(
        url=f"http://pirate.test/{number}",
        final_url=f"http://pirate.test/{number}",
        host="pirate.test",
        status=status,
        text=f"{number}号页面。" + TEXT,
        fetched_at=fetched,
        gone_since=fetched if status in GONE_STATUSES else None,  # as the crawl's store writes it
    )
    session.add(page)
    session.flush()
    return page


def test_pages_gone_for_good_lose_fingerprints_and_keep_their_evidence(
    session: Session, settings: Settings
) -> None:
    up = _page(session, 1, status=200, days_ago=100)
    gone_lately = _page(session, 2, status=404, days_ago=3)
    gone_long = _page(session, 3, status=410, days_ago=40)
    unseen = _page(session, 4, status=200, days_ago=400)
    ids = [up.id, gone_lately.id, gone_long.id, unseen.id]
    process_pages(session, ids, settings)
    work = Work(title="w", content_sha256="w", text=TEXT)
    work.chapters = [Chapter(index=0, title="一", start=0, end=len(TEXT), text=TEXT)]
    session.add(work)
    session.flush()
    long_ago = utcnow() - timedelta(days=40)
    kept = PageVersion(
        page_id=gone_long.id,
        status=200,
        final_url=gone_long.url,
        title="",
        text=TEXT,
        content_sha256="v1",
        snapshot_sha256="s1",
        encoding="utf-8",
        fetched_at=long_ago - timedelta(days=20),
        replaced_at=long_ago,
    )
    session.add(kept)
    session.add(
        Match(
            page_id=gone_long.id,
            work_id=work.id,
            chapter_id=work.chapters[0].id,
            score=0.9,
            status="confirmed",
        )
    )
    session.commit()
    assert set(load_page_codes(session, ids)) == set(ids)

    now = utcnow()
    retired = retire_page_fingerprints(
        session, gone_before=now - timedelta(days=30), unseen_before=now - timedelta(days=365)
    )
    session.commit()
    assert retired == 2
    assert set(load_page_codes(session, ids)) == {up.id, gone_lately.id}
    fingerprinted = dict(
        session.execute(select(Page.id, Page.fingerprinted_at).where(Page.id.in_(ids))).all()
    )
    assert fingerprinted[gone_long.id] is None and fingerprinted[unseen.id] is None
    assert fingerprinted[up.id] is not None and fingerprinted[gone_lately.id] is not None
    # the evidence stays: the page row and its text, the kept version, the match
    assert session.get(Page, gone_long.id).text.startswith("3号页面")  # type: ignore[union-attr]
    assert session.scalar(select(PageVersion.text).where(PageVersion.page_id == gone_long.id)) == TEXT
    assert session.scalar(select(Match.status).where(Match.page_id == gone_long.id)) == "confirmed"
    assert set(count_orphans(session).values()) == {0}
    # a retired page is no longer looked up; a second pass finds nothing more to do
    assert retire_page_fingerprints(session, gone_before=now, unseen_before=None) == 1  # gone_lately
    assert retire_page_fingerprints(session, gone_before=None, unseen_before=None) == 0


def _fetch(url: str, status: int, text: str, when: datetime) -> CrawledPage:
    digest = hashlib.sha256(f"{status}\n{text}".encode()).hexdigest()
    return CrawledPage(
        url=url,
        final_url=url,
        status=status,
        encoding="utf-8",
        title="",
        text=text,
        content_sha256=digest,
        snapshot_sha256=digest,
        fetched_at=when,
    )


def test_a_page_refetched_as_404_on_every_crawl_is_retired_counting_from_its_first_404(
    settings: Settings,
) -> None:
    """Through the crawl's real store: each re-fetch of the 404 moves ``fetched_at`` but not ``gone_since``;
    the rows of the text the page showed before stay until retention drops them (the store clears
    ``fingerprinted_at`` when the text goes: the rows are what retention looks for); a page back up is not
    gone."""
    engine = create_engine_for(settings)
    sessions = session_factory(engine)
    now = utcnow()

    def crawl(*pages: CrawledPage) -> None:
        handed: list[int] = []
        store = PageStore(sessions, job_id=None, dispatch=handed.extend, settings=settings)
        for page in pages:
            store.add(page)
        store.flush()
        if handed:
            with session_scope(sessions) as session:
                process_pages(session, handed, settings)

    still_gone, back_up = "http://pirate.test/gone", "http://pirate.test/back"
    crawl(
        _fetch(still_gone, 200, "甲" + TEXT, now - timedelta(days=60)),
        _fetch(back_up, 200, "乙" + TEXT, now - timedelta(days=60)),
    )
    crawl(
        _fetch(still_gone, 404, "", now - timedelta(days=40)),
        _fetch(back_up, 404, "", now - timedelta(days=40)),
    )
    crawl(
        _fetch(still_gone, 404, "", now - timedelta(days=1)),
        _fetch(back_up, 200, "丙" + TEXT, now - timedelta(days=1)),
    )
    with session_scope(sessions) as session:
        rows = {
            url: (as_utc(since) if since else None, as_utc(fetched))
            for url, since, fetched in session.execute(select(Page.url, Page.gone_since, Page.fetched_at))
        }
        assert rows[still_gone] == (now - timedelta(days=40), now - timedelta(days=1))
        assert rows[back_up][0] is None
        ids = dict(session.execute(select(Page.url, Page.id)).all())
        # the 404 left the rows of the text it replaced; the page back up has its new text's rows
        assert set(load_page_codes(session, list(ids.values()))) == set(ids.values())

        assert (
            retire_page_fingerprints(session, gone_before=now - timedelta(days=30), unseen_before=None) == 1
        )
        assert set(load_page_codes(session, list(ids.values()))) == {ids[back_up]}
        assert (
            session.scalar(
                select(func.count()).select_from(Fingerprint).where(Fingerprint.page_id == ids[still_gone])
            )
            == 0
        )
        month_ago = now - timedelta(days=30)
        assert retire_page_fingerprints(session, gone_before=month_ago, unseen_before=month_ago) == 0  # done
    engine.dispose()
