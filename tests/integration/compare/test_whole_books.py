"""A page holding a whole book (a downloaded .txt, an archive's texts, a page of many chapters) is compared
chapter by chapter: every registered chapter it holds is a match on it, with spans into the book's text."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from fptrack.compare import service
from fptrack.compare.works import register_work
from fptrack.core.settings import Settings
from fptrack.fingerprint.containers import Document, joined_text, member_at
from fptrack.storage.models import Chapter, Match, Page
from tests.support.books import book


def _register(session: Session, text: str) -> int:
    work = register_work(session, text.encode("utf-8"), source_name="book.txt")
    service.index_work(session, work.work_id, settings=session.info["settings"])
    return work.work_id


def _page(session: Session, url: str, text: str) -> Page:
    page = Page(url=url, final_url=url, host="127.0.0.1", status=200, encoding="utf-8", title="t", text=text)
    session.add(page)
    session.flush()
    return page


def _matched(session: Session, page: Page, settings: Settings) -> list[Match]:
    service.process_pages(session, [page.id], settings)
    return list(session.scalars(select(Match).where(Match.page_id == page.id)))


def test_every_chapter_of_a_whole_book_is_a_match(session: Session, settings: Settings) -> None:
    session.info["settings"] = settings
    text = book(1, 40)
    work_id = _register(session, text)
    other = book(2, 30)  # an unregistered novel in the same file
    download = joined_text(
        [Document("全本/书.txt", "text", text), Document("全本/另一本.txt", "text", other)]
    )
    page = _page(session, "http://127.0.0.1/down/book.zip", download)
    matches = _matched(session, page, settings)
    session.commit()

    chapters = {c.id: c for c in session.scalars(select(Chapter).where(Chapter.work_id == work_id))}
    assert sorted(chapters[m.chapter_id].index for m in matches) == list(range(1, 41))
    for match in matches:
        chapter = chapters[match.chapter_id]
        assert match.score > 0.9
        for page_start, page_end, work_start, work_end in match.spans:
            assert download[page_start:page_end] == text[work_start:work_end]
            assert chapter.start <= work_start < work_end <= chapter.end
            assert member_at(download, page_start) == "全本/书.txt"


def test_a_book_without_headings_is_compared_in_windows(session: Session, settings: Settings) -> None:
    session.info["settings"] = settings
    text = book(3, 25)
    work_id = _register(session, text)
    # the pirate's copy lost its headings: only windows over the text find each chapter
    bare = "\n".join(line for line in text.split("\n") if not line.startswith("第"))
    page = _page(session, "http://127.0.0.1/down/bare.txt", bare)
    matches = _matched(session, page, settings)
    indexes = {
        session.get(Chapter, m.chapter_id).index  # type: ignore[union-attr]
        for m in matches
        if session.get(Chapter, m.chapter_id).work_id == work_id  # type: ignore[union-attr]
    }
    assert indexes == set(range(1, 26))


def test_a_book_of_unregistered_novels_matches_nothing(session: Session, settings: Settings) -> None:
    session.info["settings"] = settings
    _register(session, book(4, 20))
    page = _page(session, "http://127.0.0.1/down/other.txt", book(5, 40) + book(6, 20))
    assert _matched(session, page, settings) == []


def test_a_book_crawled_before_its_work_was_registered(session: Session, settings: Settings) -> None:
    """Retroactive detection compares the stored book chapter by chapter too."""
    session.info["settings"] = settings
    text = book(7, 30)
    page = _page(session, "http://127.0.0.1/down/early.txt", text)
    service.process_pages(session, [page.id], settings)
    work = register_work(session, text.encode("utf-8"), source_name="book.txt")
    candidates = service.index_work(session, work.work_id, settings)
    assert page.id in candidates
    service.recompare_pages(session, candidates, settings)
    matched = session.scalars(select(Match).where(Match.page_id == page.id)).all()
    indexes = sorted(session.get(Chapter, m.chapter_id).index for m in matched)  # type: ignore[union-attr]
    assert indexes == list(range(1, 31))
