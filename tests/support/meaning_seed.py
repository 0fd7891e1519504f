"""A copy that keeps the meaning, not the words (issue 36), for the tests of what shows one: an English
translation of the seed's first chapter (``tests.support.admin_seed``) on a page with hostile markup, stored
as the meaning path stores a match (``kind``, ``alignment``; ``score`` the coverage, ``methods`` ["meaning"],
``spans`` the pairs' offsets)."""

from __future__ import annotations

from sqlalchemy.orm import Session

from fptrack.storage.models import Match, Page, Work
from tests.support.admin_seed import SCRIPT, T0, Seeded

__all__ = [
    "CHAPTER_SENTENCES",
    "CHAPTER_TWO_SENTENCES",
    "PAGE_SENTENCES",
    "PAGE_TWO_SENTENCES",
    "TRANSLATION_URL",
    "add_meaning_match",
]

TRANSLATION_URL = "http://translated.example/mountain/1.html"
CHAPTER_SENTENCES = ("山中有一座小庙，庙里住着一位老和尚。", "每天清晨他都去溪边挑水。")
PAGE_SENTENCES = (
    f"In the mountains stands a small temple {SCRIPT}, where an old monk lives.",
    "Every morning he walks down to the stream to carry water.",
)
SIMILARITIES = (0.91, 0.87)
# the second chapter, which starts further into the work's text than the first: its offsets differ
CHAPTER_TWO_SENTENCES = ("小和尚长大以后决定下山看看外面的世界，", "他带着一把旧伞出发了。")
PAGE_TWO_SENTENCES = (
    "When the little monk grew up he decided to go down the mountain and see the world;",
    "he set off with an old umbrella.",
)


def add_meaning_match(
    session: Session,
    seeded: Seeded,
    *,
    kind: str = "translation:en",
    status: str = "confirmed",
    url: str = TRANSLATION_URL,
    host: str = "translated.example",
    chapter_index: int = 1,
) -> int:
    """A meaning match of ``kind`` on the seed's first chapter (its two sentences aligned with the page's
    two; ``chapter_index`` 2: the second chapter's), committed; its id."""
    work = session.get(Work, seeded.work_id)
    assert work is not None
    chapter = work.chapters[chapter_index - 1]
    page_sentences, chapter_sentences = (
        (PAGE_SENTENCES, CHAPTER_SENTENCES)
        if chapter_index == 1
        else (PAGE_TWO_SENTENCES, CHAPTER_TWO_SENTENCES)
    )
    text = f"Chapter One {SCRIPT}\n" + " ".join(page_sentences) + "\nNext chapter | <b>ads</b>"
    pairs: list[list[float]] = []
    for page_sentence, chapter_sentence, similarity in zip(
        page_sentences, chapter_sentences, SIMILARITIES, strict=True
    ):
        page_start, chapter_start = text.index(page_sentence), chapter.text.index(chapter_sentence)
        pairs.append(
            [
                page_start,
                page_start + len(page_sentence),
                chapter_start,
                chapter_start + len(chapter_sentence),
                similarity,
            ]
        )
    page = Page(url=url, final_url=url, host=host, status=200, title=f"The Mountain {SCRIPT}", text=text)
    session.add(page)
    match = Match(
        page=page,
        work=work,
        chapter=chapter,
        score=0.84,
        methods=["meaning"],
        spans=[[int(value) for value in pair[:4]] for pair in pairs],
        kind=kind,
        alignment={
            "coverage": 0.84,
            "pairs": pairs,
            "page_sentences": 3,
            "chapter_sentences": 2,
            "model": "multilingual-e5-small-q4",
        },
        status=status,
        first_seen=T0,
        last_seen=T0,
    )
    session.add(match)
    session.commit()
    return match.id
