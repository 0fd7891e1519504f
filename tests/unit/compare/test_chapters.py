import itertools

from hypothesis import given
from hypothesis import strategies as st

from fptrack.compare.chapters import split_chapters


def test_chinese_headings_with_titles() -> None:
    text = "书名\n作者\n\n第一回 灵根育孕\n正文一。\n第二回　心性修持\n正文二。\n第十二回 玄奘秉诚\n正文三。"
    chapters = split_chapters(text)
    assert [(c.index, c.title) for c in chapters] == [
        (1, "第一回 灵根育孕"),
        (2, "第二回　心性修持"),
        (3, "第十二回 玄奘秉诚"),
    ]
    assert text[chapters[1].start : chapters[1].end] == "第二回　心性修持\n正文二。\n"


def test_numerals_volumes_and_latin() -> None:
    text = "第一卷 春\n第1章 起\n甲。\n第２章 承\n乙。\nChapter 3 Turn\nc.\nCHAPTER IV\nd."
    chapters = split_chapters(text)
    assert [c.title for c in chapters] == ["第一卷 春 第1章 起", "第２章 承", "Chapter 3 Turn", "CHAPTER IV"]


def test_long_front_matter_is_chapter_zero_short_title_is_not() -> None:
    preface = "序" * 120
    assert split_chapters(f"{preface}\n第一章\n正文")[0].index == 0
    assert split_chapters("书名\n第一章\n正文")[0].index == 1


def test_no_headings_is_one_chapter_and_empty_is_none() -> None:
    assert [(c.index, c.start, c.end) for c in split_chapters("只有一段话。")] == [(1, 0, 6)]
    assert split_chapters("  \n\u3000 ") == []


def test_a_sentence_starting_like_a_heading_is_not_one() -> None:
    text = (
        "第一章 开始\n他说：第二章的内容我已经看过了，写得非常好，"
        "但是结尾太仓促，人物的动机也交代得不够清楚，需要再改一改。\n"
    )
    assert len(split_chapters(text)) == 1


@given(st.lists(st.text(alphabet="天地人和风雨山水。，\n", min_size=1, max_size=40), min_size=1, max_size=8))
def test_chapters_are_ordered_disjoint_and_inside_the_text(bodies: list[str]) -> None:
    text = "".join(f"第{i + 1}章 标题\n{body}\n" for i, body in enumerate(bodies))
    chapters = split_chapters(text)
    assert chapters
    for before, after in itertools.pairwise(chapters):
        assert before.end <= after.start and before.index < after.index
    assert all(0 <= c.start < c.end <= len(text) for c in chapters)
    assert chapters[-1].end == len(text)


def test_a_run_of_empty_headings_folds_into_a_bounded_title() -> None:
    """Found by fuzzing: 100,000 empty headings built a 400,000-character title, quadratically."""
    from fptrack.compare.chapters import MAX_TITLE_CHARS

    spans = split_chapters("第1章\n" * 20_000 + "正文。")
    assert len(spans) == 1 and spans[0].start == 0
    assert len(spans[0].title) <= MAX_TITLE_CHARS + 80


def test_long_front_matter_is_counted_without_listing_every_character() -> None:
    text = "字" * 1_000_000 + "\n第1章\n正文。"
    spans = split_chapters(text)
    assert [(s.index, s.start) for s in spans] == [(0, 0), (1, 1_000_001)]
