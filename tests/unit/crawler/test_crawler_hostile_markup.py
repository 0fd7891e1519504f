"""Hostile markup found by fuzzing (tests/reliability/test_fuzz.py): each case with the fix's
promise."""

from __future__ import annotations

from fptrack.crawler.extract import MAX_TAG_CHARS, cap_text, extract_main_text, shorten_huge_tags
from fptrack.crawler.multipage import next_part_url

CHAPTER = "河面上起了风，渡船摇得厉害，老周把缆绳又绕了两圈。对岸的灯一盏一盏亮起来，像是有人在数着什么。"


def _many_attributes(count: int) -> str:
    return " ".join(f"a{i}=x" for i in range(count))


def test_a_tag_of_fifty_thousand_attributes_is_cut_to_its_first_ones() -> None:
    """libxml2 compares each attribute with all before it: 40,000 took 18 s, a million would take hours."""
    html = f'<html><body><div id="content" {_many_attributes(50_000)}><p>{CHAPTER}</p></div></body></html>'
    extracted = extract_main_text(html)
    assert extracted.text == CHAPTER
    assert extracted.notes == (
        f"1 start tag(s) longer than {MAX_TAG_CHARS} characters cut to their first attributes",
    )


def test_cutting_keeps_whole_attributes_and_leaves_no_quote_open() -> None:
    tag = '<div class="gg" ' + " ".join(f'a{i}="v>{i}"' for i in range(5000)) + f' title="x">{CHAPTER}'
    short = shorten_huge_tags(tag * 2)
    assert short.count('class="gg"') == 2 and short.count(CHAPTER) == 2
    shortened = shorten_huge_tags("<p " + _many_attributes(20_000) + ' style="display:none">藏</p>' + CHAPTER)
    assert shortened.startswith("<p a0=x a1=x") and shortened.endswith(">藏</p>" + CHAPTER)
    assert len(shortened) < MAX_TAG_CHARS + 100


def test_next_part_link_survives_a_tag_of_many_attributes() -> None:
    html = f'<div {_many_attributes(50_000)}>{CHAPTER}</div><a href="/book/1/2_2.html">下一页</a>'
    assert next_part_url(html, "http://novel.test/book/1/2.html") == "http://novel.test/book/1/2_2.html"


def test_a_paragraph_cut_inside_keeps_no_trailing_space() -> None:
    """Found by fuzzing: a million ``&nbsp;``-separated entities cut at the cap ended the text with a
    space."""
    text, notes = cap_text("字 " * 100, 50)
    assert text == ("字 " * 25).rstrip() and notes
