"""A copy's life through the crawl path, on SQLite and PostgreSQL: what the crawl store and the comparison of
a fetched page record about the page's matches (storage.match_life), and that nothing is deleted or
overwritten.

The pages go through the real :class:`crawler.store.PageStore` (as a crawl hands them over) and the real
compare stage (:func:`compare.service.process_pages` on the ids the store hands on)."""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterator
from datetime import timedelta

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from fptrack.cli.demo import DEMO_DATA, demo_chapters
from fptrack.compare import service
from fptrack.compare.service import Verdict, record_matches
from fptrack.compare.works import register_work_file
from fptrack.core.settings import Settings
from fptrack.crawler.pages import CrawledPage
from fptrack.crawler.store import PageStore
from fptrack.storage.db import create_engine_for, session_factory, session_scope
from fptrack.storage.match_life import UNSETTLED_NOTE, Observation, evidence_of, observe
from fptrack.storage.models import Chapter, Match, MatchNote, Page, PageVersion, TakedownCheck, as_utc, utcnow

CHAPTERS = demo_chapters("lighthouse.txt")
NOTICE = (DEMO_DATA / "library_news.txt").read_text("utf-8")  # what a page shows once the copy is removed
COPY_URL = "http://127.0.0.1:9/copy.html"
NEWS_URL = "http://127.0.0.1:9/news.html"


@pytest.fixture
def life_settings(settings: Settings) -> Settings:
    # a removal is confirmed by the next fetch that sees it down, however soon
    return dataclasses.replace(settings, recheck_confirm_after=0.0)


@pytest.fixture
def sessions(life_settings: Settings) -> Iterator[sessionmaker[Session]]:
    engine = create_engine_for(life_settings)
    factory = session_factory(engine)
    with session_scope(factory) as session:
        work = register_work_file(session, DEMO_DATA / "lighthouse.txt")
        service.index_work(session, work.work_id, life_settings)
    yield factory
    engine.dispose()


def _fetched(url: str, status: int, text: str, *, not_modified: bool = False, note: str = "") -> CrawledPage:
    digest = hashlib.sha256(f"{status}\n{text}".encode()).hexdigest()
    return CrawledPage(
        url=url,
        final_url=url,
        status=status,
        encoding="utf-8",
        title=url.rsplit("/", 1)[-1],
        text=text,
        content_sha256=digest,
        snapshot_sha256=digest,
        fetched_at=utcnow(),
        not_modified=not_modified,
        note=note,
    )


def _crawl(sessions: sessionmaker[Session], settings: Settings, *pages: CrawledPage) -> None:
    """Store ``pages`` as one crawl batch, then compare what the store hands on (the crawl's compare
    stage)."""
    handed: list[int] = []
    store = PageStore(sessions, job_id=None, dispatch=handed.extend, settings=settings)
    for page in pages:
        store.add(page)
    store.flush()
    if handed:
        with session_scope(sessions) as session:
            service.process_pages(session, handed, settings)


def _match(session: Session, url: str = COPY_URL) -> Match:
    match = session.scalar(select(Match).join(Match.page).where(Page.url == url))
    assert match is not None
    return match


def _checks(session: Session, match_id: int) -> list[tuple[str, str, int | None]]:
    rows = session.execute(
        select(TakedownCheck.outcome, TakedownCheck.source, TakedownCheck.http_status)
        .where(TakedownCheck.match_id == match_id)
        .order_by(TakedownCheck.id)
    )
    return [(str(o), str(s), h) for o, s, h in rows]


def _passages(session: Session, match: Match) -> list[str]:
    text = evidence_of(session, match).text
    return [text[int(span[0]) : int(span[1])] for span in match.spans]


def test_a_removed_copy_is_followed_and_its_text_kept_until_it_comes_back(
    sessions: sessionmaker[Session], life_settings: Settings
) -> None:
    _crawl(sessions, life_settings, _fetched(COPY_URL, 200, CHAPTERS[1]), _fetched(NEWS_URL, 200, NOTICE))
    with session_scope(sessions) as session:
        match = _match(session)
        match_id, first_seen = match.id, as_utc(match.first_seen)
        # a brand-new match: no check yet, due for its first re-check one young period after it was found
        assert _checks(session, match_id) == []
        assert as_utc(match.recheck_due_at) - first_seen == timedelta(
            seconds=life_settings.recheck_young_every
        )  # type: ignore[arg-type]
        copied = _passages(session, match)
        assert copied and all(passage in CHAPTERS[1] for passage in copied)

    # the site replaces the chapter with a notice (and edits a page that never had a match)
    _crawl(
        sessions, life_settings, _fetched(COPY_URL, 200, NOTICE), _fetched(NEWS_URL, 200, NOTICE + "\n更新")
    )
    with session_scope(sessions) as session:
        match = _match(session)
        assert match.id == match_id and match.recheck_state == "removed"
        assert match.down_seen_at is not None and match.taken_down_at is None  # seen once: not confirmed yet
        # the copied content was kept before the crawl replaced it, and the match reads its passages there
        versions = session.execute(select(PageVersion.page_id, PageVersion.text)).all()
        assert [(page_id, text) for page_id, text in versions] == [(match.page_id, CHAPTERS[1])]
        assert match.evidence_version_id is not None
        assert session.scalar(select(Page.text).where(Page.url == COPY_URL)) == NOTICE
        assert _passages(session, match) == copied
        assert evidence_of(session, match).version_id == match.evidence_version_id

    # the next crawl sees the same notice: the removal is confirmed, dated by the fetch that first saw it
    _crawl(sessions, life_settings, _fetched(COPY_URL, 200, NOTICE))
    with session_scope(sessions) as session:
        match = _match(session)
        assert match.taken_down_at is not None and match.down_seen_at is None
        assert _checks(session, match_id) == [("removed", "crawl", 200), ("removed", "crawl", 200)]
        assert session.scalar(select(func.count()).select_from(PageVersion)) == 1
        assert _passages(session, match) == copied

    # the copy is put back: same match, same first-seen, the takedown cleared, resting on the page again
    _crawl(sessions, life_settings, _fetched(COPY_URL, 200, CHAPTERS[1]))
    with session_scope(sessions) as session:
        match = _match(session)
        assert (match.id, as_utc(match.first_seen)) == (match_id, first_seen)
        assert match.taken_down_at is None and match.recheck_state == "present"
        assert match.evidence_version_id is None
        assert _passages(session, match) == copied
        assert session.scalar(select(func.count()).select_from(Match)) == 1


def test_a_5xx_never_takes_down_a_404_does_and_an_empty_render_tells_nothing(
    sessions: sessionmaker[Session], life_settings: Settings
) -> None:
    _crawl(sessions, life_settings, _fetched(COPY_URL, 200, CHAPTERS[0]))
    with session_scope(sessions) as session:
        match_id = _match(session).id
        copied = _passages(session, _match(session))

    for _ in range(3):
        _crawl(sessions, life_settings, _fetched(COPY_URL, 503, ""))
    with session_scope(sessions) as session:
        match = _match(session)
        assert _checks(session, match_id) == [("error", "crawl", 503)] * 3
        assert match.taken_down_at is None and match.down_seen_at is None
        assert _passages(session, match) == copied  # the 503 body replaced the page, not the evidence

    # back with the same text: compared again (the stored content was the 503), found present
    _crawl(sessions, life_settings, _fetched(COPY_URL, 200, CHAPTERS[0]))
    with session_scope(sessions) as session:
        match = _match(session)
        assert match.recheck_state == "present" and match.evidence_version_id is None
        checks = len(_checks(session, match_id))

    # a script page whose rendering failed (200, no text): neither present nor down
    _crawl(sessions, life_settings, _fetched(COPY_URL, 200, ""))
    _crawl(sessions, life_settings, _fetched(COPY_URL, 200, ""))
    with session_scope(sessions) as session:
        assert len(_checks(session, match_id)) == checks
        assert _match(session).taken_down_at is None

    _crawl(sessions, life_settings, _fetched(COPY_URL, 404, ""))
    _crawl(sessions, life_settings, _fetched(COPY_URL, 404, ""))
    with session_scope(sessions) as session:
        match = _match(session)
        assert _checks(session, match_id)[-2:] == [("gone", "crawl", 404)] * 2
        assert match.taken_down_at is not None
        assert _passages(session, match) == copied
        assert session.scalar(select(Page.status).where(Page.url == COPY_URL)) == 404


def test_a_page_read_before_its_scripts_were_done_is_no_removal(
    sessions: sessionmaker[Session], life_settings: Settings
) -> None:
    """A rendered page whose network never went quiet (its JSON still waiting) shows a loading placeholder:
    the crawl observes nothing from it; the same placeholder read when the page had settled is a removal."""
    _crawl(sessions, life_settings, _fetched(COPY_URL, 200, CHAPTERS[0]))
    placeholder = "正在加载……\n本站所有小说均由网友上传，如有侵权请联系删除。"
    for _ in range(2):
        _crawl(sessions, life_settings, _fetched(COPY_URL, 200, placeholder, note=UNSETTLED_NOTE))
        _crawl(sessions, life_settings, _fetched(COPY_URL, 200, CHAPTERS[0]))
    with session_scope(sessions) as session:
        match = _match(session)
        assert [o for o, _, _ in _checks(session, match.id)] == ["present", "present"]
        assert match.down_seen_at is None and match.taken_down_at is None
    _crawl(sessions, life_settings, _fetched(COPY_URL, 200, placeholder))
    with session_scope(sessions) as session:
        match = _match(session)
        assert [o for o, _, _ in _checks(session, match.id)][-1] == "removed"
        assert match.down_seen_at is not None


def test_an_unchanged_page_and_a_304_observe_the_copy_present(
    sessions: sessionmaker[Session], life_settings: Settings
) -> None:
    _crawl(sessions, life_settings, _fetched(COPY_URL, 200, CHAPTERS[2]))
    _crawl(sessions, life_settings, _fetched(COPY_URL, 200, CHAPTERS[2]))
    _crawl(sessions, life_settings, _fetched(COPY_URL, 304, "", not_modified=True))
    with session_scope(sessions) as session:
        match = _match(session)
        assert _checks(session, match.id) == [("present", "crawl", 200)] * 2
        assert session.scalar(select(func.count()).select_from(PageVersion)) == 0  # nothing replaced


def _verdict(chapter: Chapter) -> Verdict:
    return Verdict(
        work_id=chapter.work_id,
        work_title="",
        chapter_id=chapter.id,
        chapter_index=chapter.index,
        chapter_title=chapter.title,
        score=0.9,
        copied_chars=10,
        methods=("winnowing",),
        spans=((0, 10, chapter.start, chapter.start + 10),),
        flagged=True,
    )


def test_recompare_drops_plain_false_positives_only_and_a_fetch_drops_none(
    sessions: sessionmaker[Session], life_settings: Settings
) -> None:
    with session_scope(sessions) as session:
        known = list(session.scalars(select(Chapter).order_by(Chapter.id)))
        chapters = [known[number % len(known)] for number in range(5)]
        pages = []
        for number in range(5):
            url = f"http://127.0.0.1:9/{number}.html"
            page = Page(url=url, final_url=url, host="127.0.0.1:9", status=200, text="x")
            session.add(page)
            session.flush()
            pages.append((page.id, url))
        for (page_id, url), chapter in zip(pages, chapters, strict=True):
            record_matches(session, [(page_id, url)], [[_verdict(chapter)]], life_settings)
        ids = [int(session.scalar(select(Match.id).where(Match.page_id == p)) or 0) for p, _ in pages]
        # page 1's match has a check, page 2's a note, page 3's rests on a kept version, page 4's was found
        # on joined parts; page 0's has nothing but its finding
        observe(session, [Observation(ids[1], "error", 503, source="recheck")], life_settings)
        session.add(MatchNote(match_id=ids[2], author="reviewer", text="looks like a copy"))
        version = PageVersion(
            page_id=pages[3][0],
            status=200,
            final_url=pages[3][1],
            title="",
            text="x",
            content_sha256="0" * 64,
            snapshot_sha256="",
            encoding="utf-8",
            fetched_at=utcnow(),
            replaced_at=utcnow(),
        )
        session.add(version)
        session.flush()
        session.get(Match, ids[3]).evidence_version_id = version.id  # type: ignore[union-attr]
        session.get(Match, ids[4]).part_spans = [  # type: ignore[union-attr]
            {"page_id": pages[0][0], "url": pages[0][1], "part": 2, "spans": [[0, 5, 0, 5]]}
        ]
        session.flush()

        # the same texts compared again find none of them: only the plain false positive goes
        record_matches(session, pages, [[] for _ in pages], life_settings)
        left = set(session.scalars(select(Match.id)))
        assert left == set(ids[1:])

        # a fetched text never drops one: each is observed removed, except the one found on joined parts
        record_matches(session, pages[1:], [[] for _ in pages[1:]], life_settings, fresh=True)
        assert set(session.scalars(select(Match.id))) == set(ids[1:])
        assert {i: _checks(session, i)[-1][0] if _checks(session, i) else None for i in ids[1:]} == {
            ids[1]: "removed",
            ids[2]: "removed",
            ids[3]: "removed",
            ids[4]: None,
        }
