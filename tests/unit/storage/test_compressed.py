"""Texts stored compressed (storage.compressed): every ``str`` comes back exactly, through the codec and
through real SQLite and PostgreSQL columns; the empty text has one stored form, which SQL can tell."""

from __future__ import annotations

import zlib
from datetime import UTC, datetime

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from fptrack.storage.compressed import (
    RAW_UTF8,
    ZLIB_UTF8,
    ZLIB_UTF16,
    compress_text,
    decompress_text,
    has_text,
)
from fptrack.storage.models import Chapter, Page, PageVersion, Work

NOVEL = "第一回 灵根育孕源流出 心性修持大道生。诗曰：混沌未分天地乱，茫茫渺渺无人见。" * 80
TRICKY = [
    "",
    " ",
    "a",
    "\x00",
    "中\x00文",
    "𠀀𪚥🀄 astral",  # outside the BMP: two UTF-16 units, four UTF-8 bytes
    "\ud800 lone surrogate \udfff",
    "\r\n\t\u2028\ufeff",
    NOVEL,
    "Latin text with markup <p>and</p> more. " * 50,
]


@given(st.text())
@example("")
@example("\x00" * 3)
@example("𝕏" * 5000)
def test_any_text_round_trips(text: str) -> None:
    stored = compress_text(text)
    assert decompress_text(stored) == text
    assert decompress_text(memoryview(stored)) == text
    assert (stored == b"") == (text == "")  # the one form of the empty text


@pytest.mark.parametrize("text", TRICKY)
def test_tricky_texts_round_trip(text: str) -> None:
    assert decompress_text(compress_text(text)) == text


def test_format_picks_the_smaller_encoding() -> None:
    assert compress_text("") == b""
    assert compress_text("a")[0] == RAW_UTF8  # zlib's header would cost more than it saves
    assert compress_text(NOVEL)[0] == ZLIB_UTF16
    assert compress_text("Latin text " * 100)[0] == ZLIB_UTF8
    # a novel shrinks to well under half its UTF-8 size
    assert len(compress_text(NOVEL)) < len(NOVEL.encode("utf-8")) / 4
    assert decompress_text(None) == ""


def test_an_unknown_format_is_refused_rather_than_misread() -> None:
    with pytest.raises(ValueError, match="0x7f"):
        decompress_text(b"\x7f" + zlib.compress(b"x"))


def test_texts_round_trip_through_the_database(session: Session) -> None:
    """Through the real columns of both backends (bytea holds the NUL that PostgreSQL's text refused), and
    SQL tells the pages with text from those without."""
    now = datetime(2026, 1, 2, tzinfo=UTC)
    work = Work(title="w", content_sha256="sha-w", text=NOVEL)
    session.add(work)
    session.flush()
    for n, text in enumerate(TRICKY):
        session.add(Chapter(work_id=work.id, index=n, title=str(n), start=0, end=len(text), text=text))
        page = Page(url=f"http://p.test/{n}", final_url=f"http://p.test/{n}", status=200, text=text)
        session.add(page)
        session.flush()
        session.add(
            PageVersion(page_id=page.id, status=200, text=text, fetched_at=now, content_sha256=str(n))
        )
    session.commit()
    session.expire_all()

    pages = session.execute(select(Page.url, Page.text).order_by(Page.id)).all()
    assert [text for _, text in pages] == TRICKY
    assert [c.text for c in session.scalars(select(Chapter).order_by(Chapter.index))] == TRICKY
    assert list(session.scalars(select(PageVersion.text).order_by(PageVersion.id))) == TRICKY
    with_text = set(session.scalars(select(Page.url).where(has_text(Page.text))))
    assert with_text == {f"http://p.test/{n}" for n, text in enumerate(TRICKY) if text}
    # the stored novel is its compressed form
    stored = session.scalar(
        select(func.length(Page.text)).where(Page.url == f"http://p.test/{TRICKY.index(NOVEL)}")
    )
    assert stored == len(compress_text(NOVEL))
