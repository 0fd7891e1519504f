"""A chapter split over three pages, each too short to match on its own, is matched once the parts are joined;
the match sits on the first page with its spans mapped back to the parts, whatever the order the parts were
stored and compared in (SQLite and PostgreSQL)."""

from __future__ import annotations

import random
import threading

from sqlalchemy import Engine, event, select
from sqlalchemy.orm import Session

from fptrack.cli.demo import DEMO_DATA
from fptrack.compare import service
from fptrack.compare.multipage import MULTIPAGE_METHOD
from fptrack.compare.templates import settle_pages, settle_site
from fptrack.compare.works import register_work_file
from fptrack.core.settings import Settings
from fptrack.jobs.retroactive import index_and_recheck
from fptrack.storage.db import create_engine_for, session_factory
from fptrack.storage.models import Match, Page
from fptrack.storage.sites import site_ids, site_of
from tests.support.multipage import CONTINUED, demo_chapter_slices

SLICES = demo_chapter_slices()  # 42 characters each: under the 50 of a quotation
URLS = ["http://split.test/book/7.html", "http://split.test/book/7_2.html", "http://split.test/book/7_3.html"]
TEXTS = [
    f"第七章 （{n + 1}/3）\n{part}" + (f"\n{CONTINUED}" if n < 2 else "") for n, part in enumerate(SLICES)
]


def _store(session: Session, order: list[int], *, chained: bool = True) -> dict[str, Page]:
    key = site_of(URLS[0])
    site = site_ids(session, [key])[key]
    pages = {}
    for n in order:
        page = session.scalar(select(Page).where(Page.url == URLS[n]))
        if page is None:
            page = Page(
                url=URLS[n],
                final_url=URLS[n],
                host=key,
                status=200,
                encoding="utf-8",
                title="第七章",
                site_id=site,
            )
            session.add(page)
        page.text = TEXTS[n]
        page.next_part_url = URLS[n + 1] if chained and n < 2 else ""
        page.compared_at = None
        session.flush()
        pages[URLS[n]] = page
    return pages


def _matches(session: Session) -> list[tuple[str, int, list[str], dict[int, list[list[int]]]]]:
    """(page URL, chapter, methods, part number -> spans in that part's text) of every match."""
    rows = session.scalars(select(Match).join(Page, Page.id == Match.page_id).order_by(Page.url)).all()
    return [
        (
            m.page.url,
            m.chapter.index,
            list(m.methods),
            {1: [list(s) for s in m.spans], **{p["part"]: p["spans"] for p in m.part_spans or []}},
        )
        for m in rows
    ]


def test_the_parts_joined_match_and_alone_do_not(session: Session, settings: Settings) -> None:
    work = register_work_file(session, DEMO_DATA / "lighthouse.txt")
    service.index_work(session, work.work_id, settings)

    pages = _store(session, [0, 1, 2], chained=False)
    service.process_pages(session, [p.id for p in pages.values()], settings)
    settle_site(session, pages[URLS[0]].site_id or 0, settings)
    assert _matches(session) == []  # no part copies enough on its own

    answers = []
    for seed in (1, 2, 3):
        order = [0, 1, 2]
        random.Random(seed).shuffle(order)
        for n in order:  # one part at a time, settling after each: the worst interleaving
            pages = _store(session, [n])
            service.process_pages(session, [pages[URLS[n]].id], settings)
            settle_site(session, pages[URLS[n]].site_id or 0, settings)
        answers.append(_matches(session))
    assert answers[0] == answers[1] == answers[2]
    [(url, chapter, methods, parts)] = answers[0]
    assert (url, chapter, methods[-1]) == (URLS[0], 1, MULTIPAGE_METHOD)
    assert sorted(parts) == [1, 2, 3] and all(parts.values())  # passages found on each of the three parts
    match = session.scalars(select(Match)).one()
    assert [(p["url"], p["page_id"]) for p in match.part_spans] == [
        (URLS[n], session.scalar(select(Page.id).where(Page.url == URLS[n]))) for n in (1, 2)
    ]
    for number, part_spans in parts.items():
        for page_start, page_end, work_start, work_end in part_spans:
            copied = TEXTS[number - 1][page_start:page_end]
            assert copied and copied in SLICES[number - 1]  # offsets in that part's own text
            assert work.work_id and work_end > work_start

    # re-crawled without its "下一页" link, the first page is a chapter of its own again: its joined match
    # goes, and the two parts still chained are a chain of their own
    pages = _store(session, [0], chained=False)
    service.process_pages(session, [pages[URLS[0]].id], settings)
    settle_site(session, pages[URLS[0]].site_id or 0, settings)
    assert [(url, chapter) for url, chapter, _, _ in _matches(session)] == [(URLS[1], 1)]
    session.commit()


def test_a_work_registered_after_the_site_settled_finds_its_chapter_on_the_parts_joined(
    session: Session, settings: Settings
) -> None:
    """Registration compares the site's chains again with its stored template (compare.templates.settle_pages:
    the site unchanged since it settled), and finds the joined chapter as settling the site whole would; a
    second registration keeps it."""
    pages = _store(session, [0, 1, 2])
    service.process_pages(session, [p.id for p in pages.values()], settings)
    site_id = pages[URLS[0]].site_id or 0
    settle_site(session, site_id, settings)
    assert _matches(session) == []  # no work registered yet
    work = register_work_file(session, DEMO_DATA / "lighthouse.txt")
    candidates = service.index_work(session, work.work_id, settings)
    assert set(candidates) & {p.id for p in pages.values()}, "no part of the chain is a candidate"
    index_and_recheck(session, work.work_id, settings)
    found = _matches(session)
    assert [(url, chapter, methods[-1]) for url, chapter, methods, _ in found] == [
        (URLS[0], 1, MULTIPAGE_METHOD)
    ]
    other = register_work_file(session, DEMO_DATA / "rainy_night.txt")
    index_and_recheck(session, other.work_id, settings)
    settle_pages(session, site_id, [pages[URLS[1]].id], settings)  # as if a part were its candidate
    assert _matches(session) == found
    session.commit()


def test_a_work_registered_while_the_site_settles_keeps_its_match_on_the_parts_joined(
    engine: Engine, settings: Settings
) -> None:
    """The site's settling compares its chain joined before the work is registered; another session then
    registers the work and its look-up records the chapter found on the parts joined, before the settling
    drops the multi-page matches it did not find again. The settling holds the registry from its chains'
    compare to its commit (compare.chapter_index.hold_registry), so the registration waits for it and its
    look-up runs after: the match stays. Without the hold, the settling dropped it as stale."""
    sessions = session_factory(engine)
    other = create_engine_for(settings)
    with sessions() as session:
        pages = _store(session, [0, 1, 2])
        service.process_pages(session, [p.id for p in pages.values()], settings)
        site_id = pages[URLS[0]].site_id or 0
        work_id = register_work_file(session, DEMO_DATA / "lighthouse.txt").work_id
        session.commit()
    looked_up = threading.Event()

    def register_and_look_up() -> None:
        with session_factory(other)() as writer:
            written = service.fingerprint_work(writer, work_id, settings)
            writer.commit()
            index_and_recheck(writer, work_id, settings, fingerprinted=written)
            writer.commit()
        looked_up.set()

    registrar = threading.Thread(target=register_and_look_up)

    def register_before_the_stale_matches_are_read(conn, cursor, statement, *args) -> None:  # type: ignore[no-untyped-def]
        if registrar.is_alive() or looked_up.is_set() or "matches.recheck_state" not in statement:
            return
        registrar.start()
        looked_up.wait(timeout=5)  # done at once without the hold; with it, waits for this settling

    event.listen(engine, "before_cursor_execute", register_before_the_stale_matches_are_read)
    try:
        with sessions() as session:
            settle_site(session, site_id, settings)
            session.commit()
    finally:
        event.remove(engine, "before_cursor_execute", register_before_the_stale_matches_are_read)
    registrar.join(timeout=120)
    other.dispose()
    assert looked_up.is_set()
    with sessions() as session:
        assert [(url, chapter, methods[-1]) for url, chapter, methods, _ in _matches(session)] == [
            (URLS[0], 1, MULTIPAGE_METHOD)
        ]
