"""Passages through the real compare path (register, index, process_pages, the recorded match): a verbatim
copy of a long chapter full of repeated lines, inside a page's chrome, is one passage without edits; so is a
copy in Traditional script; the registered text is indented with "　　", the copies are not."""

from __future__ import annotations

import random

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from fptrack.compare import service
from fptrack.compare.works import register_work
from fptrack.core.settings import Settings
from fptrack.fingerprint.normalize import is_kept_char
from fptrack.services.evidence.passages import evidence_spans, span_diff
from fptrack.storage.models import Match, Page, Work
from tests.support.copy_kinds import CHROME_HEAD, CHROME_TAIL, VERBATIM_KINDS, body, long_chapter, page_of

pytestmark = pytest.mark.slow


def _register(session: Session, settings: Settings) -> Work:
    chapters = [long_chapter(seed, 11_000) for seed in (0, 1, 2)]  # headings 第1章, 第2章, 第3章
    text = "长夜集\n\n" + "\n\n".join(chapters) + "\n"
    registered = register_work(session, text.encode("utf-8"), source_name="long.txt")
    service.index_work(session, registered.work_id, settings)
    work = session.get(Work, registered.work_id)
    assert work is not None and [c.index for c in work.chapters] == [1, 2, 3]
    return work


@pytest.mark.parametrize("kind", ["verbatim", "traditional"])
def test_a_copy_of_a_long_chapter_is_one_passage_without_edits(
    session: Session, settings: Settings, kind: str
) -> None:
    work = _register(session, settings)
    chapter = work.chapters[1]
    assert len(chapter.text) > 10_000
    text = page_of(VERBATIM_KINDS[kind](chapter.text, "", random.Random(0)))
    page = Page(url="http://127.0.0.1/c2.html", final_url="http://127.0.0.1/c2.html", host="127.0.0.1")
    page.status, page.encoding, page.title, page.text = 200, "utf-8", "第2章", text
    session.add(page)
    session.flush()
    service.process_pages(session, [page.id], settings)
    session.commit()

    matches = list(session.scalars(select(Match).where(Match.page_id == page.id)))
    assert [(m.work_id, m.chapter.index) for m in matches] == [(work.id, 2)]
    spans = evidence_spans(matches[0].spans)
    assert len(spans) == 1, matches[0].spans
    (span,) = spans
    # the whole chapter body on both sides: from its first letter to its last (not the closing punctuation)
    kept = [i for i, ch in enumerate(chapter.text) if is_kept_char(ch)]
    assert span.work_start == chapter.start + chapter.text.index(body(chapter.text)[0])
    assert span.work_end == chapter.start + kept[-1] + 1
    page_kept = [i for i, ch in enumerate(text) if is_kept_char(ch)]
    assert span.page_start == len(CHROME_HEAD)
    assert span.page_end == max(i for i in page_kept if i < len(text) - len(CHROME_TAIL)) + 1
    assert span_diff(text, work.text, span).identical
    assert matches[0].score > 0.99
