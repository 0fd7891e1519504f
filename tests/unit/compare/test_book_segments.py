"""compare.chapters.book_segments: the parts a long page (a whole book) is compared by, property-tested."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from fptrack.compare.chapters import BOOK_MIN_CHARS, WINDOW_CHARS, book_segments, split_chapters

_PROSE = st.text(alphabet="天下大势分久必合，。\n", min_size=0, max_size=30_000)
_CHAPTER = st.builds(lambda n, body: f"第{n}章 标题\n{body}\n", st.integers(1, 999), _PROSE)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(_CHAPTER, _PROSE), max_size=8).map("".join), st.data())
def test_every_short_passage_lies_whole_in_one_segment(text: str, data: st.DataObject) -> None:
    segments = book_segments(text)
    if len(text) < BOOK_MIN_CHARS:
        assert segments == []
        return
    assert all(0 <= start < end <= len(text) and end - start <= WINDOW_CHARS for start, end in segments)
    # what a registered chapter can be: a chapter of the text under its heading, or any half window
    for span in split_chapters(text):
        if span.end - span.start <= WINDOW_CHARS // 2:
            assert any(start <= span.start and span.end <= end for start, end in segments)
    start = data.draw(st.integers(0, max(0, len(text) - 1)))
    end = min(len(text), start + data.draw(st.integers(1, WINDOW_CHARS // 2)))
    headed = [s for s in split_chapters(text) if s.start <= start < s.end]
    if headed and headed[0].start <= start and end <= headed[0].end:  # a passage inside one chapter
        assert any(s <= start and end <= e for s, e in segments)


def test_a_chapter_page_is_not_split() -> None:
    assert book_segments("第一章 开始\n" + "天下大势。" * 2000) == []


def test_a_book_is_split_at_its_headings() -> None:
    text = "".join(f"第{n}章 题\n" + "天下大势。" * 600 + "\n" for n in range(1, 6))
    spans = split_chapters(text)
    assert book_segments(text) == [(s.start, s.end) for s in spans]
