"""End to end, one page per way pirates disguise a copy: the real ``fptrack`` CLI crawls a real HTTP server on
127.0.0.1 and the match JSON is checked exactly: which (work, chapter) every page copies, and where.

Texts are the project's own (``cli/demo_data``); edits are generated with fixed seeds. Kinds: a verbatim copy,
GBK, Big5 (Traditional), random edits at 5/10/15/20 %, same-sound swaps at 10/30 %, injected pinyin
annotations, ads spliced between and inside paragraphs, shuffled paragraphs, a chapter split over two pages,
two chapters on one page and an excerpt inside a news story; and pages that must not match: an unregistered
story, news, a quotation under 50 characters."""

from __future__ import annotations

import json
import random

import pytest
from sqlalchemy import select

from fptrack.cli.demo import DEMO_DATA, demo_chapters, homophone_swaps, random_edits
from fptrack.fingerprint.normalize import is_kept_char
from fptrack.storage.db import create_engine_for, session_factory
from fptrack.storage.models import Page as StoredPage
from fptrack.storage.models import Work
from testbed.sites import Page, as_served, chapter_page, serve_site

pytestmark = pytest.mark.slow

LIGHT = demo_chapters("lighthouse.txt")
ALLEY = demo_chapters("alley.txt")
OTHER = demo_chapters("rainy_night.txt")
NEWS = [line for line in (DEMO_DATA / "library_news.txt").read_text("utf-8").split("\n") if line.strip()]
TITLES = {"lighthouse": "灯塔守望人", "alley": "青石巷"}


def _body(chapter: str) -> list[str]:
    """The chapter's paragraphs without its heading line."""
    lines = [line.strip("\u3000 ") for line in chapter.split("\n") if line.strip()]
    return lines[1:]


def _pinyin_annotated(text: str, rng: random.Random) -> str:
    from pypinyin import Style, pinyin

    return "".join(
        ch
        + (
            f"({pinyin(ch, style=Style.TONE)[0][0]})"
            if "\u4e00" <= ch <= "\u9fff" and rng.random() < 0.1
            else ""
        )
        for ch in text
    )


def _with_ads(paragraphs: list[str]) -> list[str]:
    out = []
    for index, paragraph in enumerate(paragraphs):
        cut = len(paragraph) // 2
        out.append(paragraph[:cut] + "小^说^无广告的~顶点*小说~网www.shuyaya.com" + paragraph[cut:])
        if index % 2 == 0:
            out.append("更多TXT电子书下载,请访问雨枫轩:http://www.rain8.com")
    return out


def _site() -> tuple[dict[str, Page], dict[str, set[tuple[str, int]]], str]:
    rng = random.Random(2024)
    excerpt = "".join(_body(ALLEY[1]))[120:520]
    a1 = _body(ALLEY[0])
    half = len(a1) // 2
    shuffled = _body(LIGHT[2])
    random.Random(5).shuffle(shuffled)
    pages = {
        "/copy.html": chapter_page("灯塔 第一章", _body(LIGHT[0])),
        "/gbk.html": chapter_page("灯塔 第二章", _body(LIGHT[1]), encoding="gbk", header_charset=False),
        "/big5.html": chapter_page("灯塔 第三章", _body(LIGHT[2]), encoding="big5", template="split-divs"),
        "/edit05.html": chapter_page(
            "青石巷1", _body(random_edits(ALLEY[0], 0.05, rng)), template="p-paragraphs"
        ),
        "/edit10.html": chapter_page(
            "青石巷2", _body(random_edits(ALLEY[1], 0.10, rng)), template="ad-inside"
        ),
        "/edit15.html": chapter_page(
            "青石巷3", _body(random_edits(ALLEY[2], 0.15, rng)), template="html5-article"
        ),
        "/edit20.html": chapter_page("灯塔1", _body(random_edits(LIGHT[0], 0.20, rng))),
        "/homophone10.html": chapter_page(
            "灯塔2", _body(homophone_swaps(LIGHT[1], 0.10, rng)), template="p-paragraphs"
        ),
        "/homophone30.html": chapter_page("青石巷一", _body(homophone_swaps(ALLEY[0], 0.30, rng))),
        "/pinyin.html": chapter_page(
            "青石巷二", _body(_pinyin_annotated(ALLEY[1], rng)), template="split-divs"
        ),
        "/ads.html": chapter_page("青石巷三", _with_ads(_body(ALLEY[2])), template="p-paragraphs"),
        "/shuffled.html": chapter_page("灯塔三", shuffled, template="html5-article"),
        "/split-1.html": chapter_page("青石巷（上）", a1[:half]),
        "/split-2.html": chapter_page("青石巷（下）", a1[half:]),
        "/two.html": chapter_page("灯塔一二", _body(LIGHT[0]) + _body(LIGHT[1]), template="p-paragraphs"),
        "/excerpt.html": chapter_page(
            "老城区的手艺人", [NEWS[1], "网友转发：", excerpt, NEWS[2]], template="html5-article"
        ),
        "/other.html": chapter_page("雨夜来客", _body(OTHER[0])),
        "/news.html": chapter_page(NEWS[0], NEWS[1:], template="html5-article"),
        "/quote.html": chapter_page(
            "读书笔记", ["最近读到一句话：" + "".join(_body(LIGHT[2]))[200:240], "推荐大家读原著。"]
        ),
    }
    index = "".join(f'<li><a href="{path}">{path}</a></li>' for path in pages)
    pages["/"] = Page.html(f"<html><body><ul>{index}</ul></body></html>")
    expected = {
        "/copy.html": {("lighthouse", 1)},
        "/gbk.html": {("lighthouse", 2)},
        "/big5.html": {("lighthouse", 3)},
        "/edit05.html": {("alley", 1)},
        "/edit10.html": {("alley", 2)},
        "/edit15.html": {("alley", 3)},
        "/edit20.html": {("lighthouse", 1)},
        "/homophone10.html": {("lighthouse", 2)},
        "/homophone30.html": {("alley", 1)},
        "/pinyin.html": {("alley", 2)},
        "/ads.html": {("alley", 3)},
        "/shuffled.html": {("lighthouse", 3)},
        "/split-1.html": {("alley", 1)},
        "/split-2.html": {("alley", 1)},
        "/two.html": {("lighthouse", 1), ("lighthouse", 2)},
        "/excerpt.html": {("alley", 2)},
    }
    return pages, expected, excerpt


def _kept_span(text: str, start: int, end: int) -> tuple[int, int]:
    """``[start, end)`` narrowed to its first and last letter or digit (spans never start or end on
    punctuation)."""
    while start < end and not is_kept_char(text[start]):
        start += 1
    while end > start and not is_kept_char(text[end - 1]):
        end -= 1
    return start, end


def _span_of(text: str, first: str, last: str) -> tuple[int, int]:
    start = text.index(first)
    end = text.index(last, start) + len(last)
    return _kept_span(text, start, end)


def test_every_edit_kind_is_found_with_its_spans(fptrack) -> None:
    pages, expected, excerpt = _site()
    fptrack.run("init")
    fptrack.run("works", "add", str(DEMO_DATA / "lighthouse.txt"), str(DEMO_DATA / "alley.txt"))
    with serve_site(pages) as base:
        fptrack.run(
            "crawl",
            base + "/",
            "--allow-private-host",
            base.key,
            "--depth",
            "1",
            "--max-pages",
            "40",
            "--quiet",
        )
    matches = fptrack.matches()
    key = {title: name for name, title in TITLES.items()}
    found: dict[str, set[tuple[str, int]]] = {}
    by_page: dict[tuple[str, str, int], list[list[int]]] = {}
    for m in matches:
        path = m["page_url"].removeprefix(base)
        found.setdefault(path, set()).add((key[m["work_title"]], m["chapter_index"]))
        by_page[(path, key[m["work_title"]], m["chapter_index"])] = m["spans"]
        assert m["spans"] and m["methods"] and 0 < m["score"] <= 1
    assert found == expected

    engine = create_engine_for(fptrack.settings)
    with session_factory(engine)() as session:
        texts = {p.url.removeprefix(base): p.text for p in session.scalars(select(StoredPage))}
        works = {key[w.title]: w.text for w in session.scalars(select(Work))}
    engine.dispose()

    # verbatim copies (whatever the encoding or script): one span, the whole chapter body on both sides
    for path, work, number, chapter, encoding in [
        ("/copy.html", "lighthouse", 1, LIGHT[0], "utf-8"),
        ("/gbk.html", "lighthouse", 2, LIGHT[1], "gbk"),
        ("/big5.html", "lighthouse", 3, LIGHT[2], "big5"),
    ]:
        body = _body(chapter)
        page_span = _span_of(texts[path], as_served(body[0], encoding), as_served(body[-1], encoding))
        work_span = _span_of(works[work], body[0], body[-1])
        assert by_page[(path, work, number)] == [[*page_span, *work_span]], path

    # the excerpt: exactly the quoted passage, located in the news page and in the work
    ex_page = _kept_span(texts["/excerpt.html"], *_find(texts["/excerpt.html"], excerpt))
    ex_work = _kept_span(works["alley"], *_find(works["alley"], excerpt))
    assert by_page[("/excerpt.html", "alley", 2)] == [[*ex_page, *ex_work]]

    # edited, swapped, annotated, ad-ridden and shuffled copies: the spans cover the copied body and every
    # span pairs page text with text of the right chapter
    for (path, work, number), spans in by_page.items():
        chapter_text = (LIGHT if work == "lighthouse" else ALLEY)[number - 1]
        chapter_start = works[work].index(chapter_text)
        for page_start, page_end, work_start, work_end in spans:
            assert 0 <= page_start < page_end <= len(texts[path])
            assert chapter_start <= work_start < work_end <= chapter_start + len(chapter_text), (path, spans)
        covered = sum(sum(map(is_kept_char, texts[path][s:e])) for s, e, _, _ in spans)
        kept_page = sum(map(is_kept_char, texts[path]))
        if path not in ("/excerpt.html", "/two.html"):
            # dense edits leave stretches with no shared k-gram; lighter disguises leave next to nothing out
            floor = 0.5 if path.startswith(("/edit", "/homophone")) else 0.9
            assert covered >= floor * kept_page, (path, covered, kept_page)
    shuffled_spans = by_page[("/shuffled.html", "lighthouse", 3)]
    assert len(shuffled_spans) > 1  # moved paragraphs are separate passages
    two = texts["/two.html"]
    boundary = two.index(_body(LIGHT[1])[0])
    assert all(e <= boundary for _, e, _, _ in by_page[("/two.html", "lighthouse", 1)])
    assert all(s >= boundary for s, _, _, _ in by_page[("/two.html", "lighthouse", 2)])


def _find(text: str, passage: str) -> tuple[int, int]:
    start = text.index(passage[:20])
    tail = passage[-20:]
    return start, text.index(tail, start) + len(tail)


def test_a_licensed_site_moves_its_matches_out_of_the_flagged_list(fptrack) -> None:
    pages = {
        "/": Page.html('<a href="/1.html">1</a> <a href="/2.html">2</a>'),
        "/1.html": chapter_page("灯塔 第一章", _body(LIGHT[0])),
        "/2.html": chapter_page("青石巷 第一回", _body(ALLEY[0]), template="p-paragraphs"),
    }
    fptrack.run("init")
    fptrack.run("works", "add", str(DEMO_DATA / "lighthouse.txt"), str(DEMO_DATA / "alley.txt"))
    with serve_site(pages) as base:
        fptrack.run("crawl", base + "/", "--allow-private-host", base.key, "--depth", "1", "--quiet")
    assert {(m["work_title"], m["chapter_index"]) for m in fptrack.matches()} == {
        ("灯塔守望人", 1),
        ("青石巷", 1),
    }

    site = base.removeprefix("http://")
    licensed = fptrack.run("works", "license", "1", site)
    assert f"work #1: {site} is licensed (1 existing match(es) relabelled)" in licensed.stdout
    assert [(m["work_title"], m["chapter_index"]) for m in fptrack.matches()] == [("青石巷", 1)]
    out = fptrack.run("matches", "--format", "json", "--status", "licensed").stdout
    assert [json.loads(line)["work_title"] for line in out.splitlines() if line.strip()] == ["灯塔守望人"]

    refused = fptrack.run("works", "license", "99", site, check=False)
    assert refused.returncode != 0 and "no work with id 99" in refused.stderr
