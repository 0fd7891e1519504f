"""The compare service on a real database (SQLite and PostgreSQL): fingerprint, index, compare, record."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from fptrack.cli.demo import DEMO_DATA, demo_chapters
from fptrack.compare import service
from fptrack.compare.works import register_work_file
from fptrack.core.settings import Settings
from fptrack.storage.models import CodeIndexRow, Fingerprint, Match, Page, Work


def _page(session: Session, url: str, text: str) -> Page:
    page = Page(url=url, final_url=url, host="127.0.0.1", status=200, encoding="utf-8", title="t", text=text)
    session.add(page)
    session.flush()
    return page


def _fingerprint(session: Session, page: Page, settings: Settings) -> list[Match]:
    """Compare a page (again): what the crawl stage does to a page stored with new content."""
    page.compared_at = None
    session.flush()
    service.process_pages(session, [page.id], settings)
    return list(session.scalars(select(Match).where(Match.page_id == page.id)))


def _count(session: Session, model: type) -> int:
    return session.scalar(select(func.count()).select_from(model)) or 0


def test_page_copying_a_chapter_is_matched_with_spans(session: Session, settings: Settings) -> None:
    work = register_work_file(session, DEMO_DATA / "lighthouse.txt")
    service.index_work(session, work.work_id, settings)
    chapter_two = demo_chapters("lighthouse.txt")[1]
    text = "首页 > 小说 > 灯塔守望人\n" + chapter_two + "\n上一章 目录 下一章"
    page = _page(session, "http://127.0.0.1/x.html", text)
    matches = _fingerprint(session, page, settings)
    session.commit()

    assert [(m.work_id, m.chapter.index) for m in matches] == [(work.work_id, 2)]
    match = matches[0]
    assert match.score > 0.9 and "winnowing" in match.methods
    work_text = session.get(Work, work.work_id).text
    for page_start, page_end, work_start, work_end in match.spans:
        assert text[page_start:page_end] == work_text[work_start:work_end]


def test_unrelated_page_has_no_match(session: Session, settings: Settings) -> None:
    work = register_work_file(session, DEMO_DATA / "alley.txt")
    service.index_work(session, work.work_id, settings)
    page = _page(session, "http://127.0.0.1/news.html", (DEMO_DATA / "library_news.txt").read_text("utf-8"))
    assert _fingerprint(session, page, settings) == []


def test_refingerprinting_and_deleting_leave_no_orphans(session: Session, settings: Settings) -> None:
    work = register_work_file(session, DEMO_DATA / "alley.txt")
    service.index_work(session, work.work_id, settings)
    page = _page(session, "http://127.0.0.1/a.html", demo_chapters("alley.txt")[0])
    _fingerprint(session, page, settings)
    session.commit()
    before = (_count(session, Fingerprint), _count(session, CodeIndexRow))
    _fingerprint(session, page, settings)
    service.index_work(session, work.work_id, settings)
    session.commit()
    assert (_count(session, Fingerprint), _count(session, CodeIndexRow)) == before
    assert _count(session, Match) == 1

    session.delete(session.get(Work, work.work_id))
    session.delete(session.get(Page, page.id))
    session.commit()
    assert (_count(session, Fingerprint), _count(session, CodeIndexRow)) == (0, 0)
    assert _count(session, Match) == 0


def test_a_page_already_compared_is_not_processed_again(session: Session, settings: Settings) -> None:
    """A task delivered twice (or a page handed on again by the sweep after all) changes nothing."""
    work = register_work_file(session, DEMO_DATA / "alley.txt")
    service.index_work(session, work.work_id, settings)
    page = _page(session, "http://127.0.0.1/b.html", demo_chapters("alley.txt")[1])
    first = service.process_pages(session, [page.id], settings)
    assert [o.page_id for o in first] == [page.id] and first[0].matched_chapters
    match = session.scalar(select(Match).where(Match.page_id == page.id))
    assert match is not None
    seen = (match.id, match.first_seen, match.last_seen)
    assert service.process_pages(session, [page.id, 999_999], settings) == []  # done already; gone: ignored
    again = session.scalar(select(Match).where(Match.page_id == page.id))
    assert again is not None and (again.id, again.first_seen, again.last_seen) == seen


def test_a_batch_copying_several_works_records_its_matches_in_one_insert(
    session: Session, settings: Settings
) -> None:
    """A batch whose pages copy chapters of two works (one of them licensed on the pages' site) inserts its
    matches in one statement: licences are read before the first match is added, so no query flushes part of
    them early. Two statements would upsert the rollup rows (PostgreSQL's trigger) in two runs of key order,
    which deadlocked two workers comparing batches at once."""
    from sqlalchemy import event

    from fptrack.compare.licensing import add_licensed_site
    from fptrack.storage.models import MatchStatus

    light = register_work_file(session, DEMO_DATA / "lighthouse.txt")
    alley = register_work_file(session, DEMO_DATA / "alley.txt")
    for work in (light, alley):
        service.index_work(session, work.work_id, settings)
    add_licensed_site(session, alley.work_id, "127.0.0.1")
    chapters = [("lighthouse.txt", 0), ("alley.txt", 0), ("lighthouse.txt", 1), ("alley.txt", 1)]
    pages = [
        _page(session, f"http://127.0.0.1/{number}.html", demo_chapters(name)[index])
        for number, (name, index) in enumerate(chapters)
    ]
    session.flush()
    inserts: list[str] = []

    def count(conn: object, cursor: object, statement: str, *args: object) -> None:
        if statement.lstrip().upper().startswith("INSERT INTO MATCHES"):
            inserts.append(statement)

    bind = session.get_bind()
    event.listen(bind, "before_cursor_execute", count)
    try:
        service.process_pages(session, [page.id for page in pages], settings)
    finally:
        event.remove(bind, "before_cursor_execute", count)
    session.commit()

    found = {(m.page_id, m.work_id, m.status) for m in session.scalars(select(Match))}
    work_of = {"lighthouse.txt": light.work_id, "alley.txt": alley.work_id}
    assert found == {
        (page.id, work_of[name], MatchStatus.LICENSED if name == "alley.txt" else MatchStatus.FLAGGED)
        for page, (name, _) in zip(pages, chapters, strict=True)
    }
    assert len(inserts) == 1, inserts  # every new match in one statement
