"""The pirate site of the end-to-end tests: copies of the demo's registered works as pirates publish them
(UTF-8, GBK with the charset only in <meta>, Big5 Traditional, broken HTML, same-sound swaps, edits, a
redirect, an excerpt inside news) beside pages that must not match (an unregistered story, news, a short
quotation, a 404). ``pirate_site`` returns the pages and the (work, chapter) each copy must be flagged as."""

from __future__ import annotations

import random

from fptrack.cli.demo import DEMO_DATA, demo_chapters, homophone_swaps, random_edits
from testbed.sites import Page, Redirect, chapter_page

LIGHT = demo_chapters("lighthouse.txt")
ALLEY = demo_chapters("alley.txt")
OTHER = demo_chapters("rainy_night.txt")
NEWS = (DEMO_DATA / "library_news.txt").read_text("utf-8").split("\n")


def paragraphs_of(chapter: str) -> list[str]:
    return [line for line in chapter.split("\n") if line.strip()]


def pirate_site() -> tuple[dict[str, Page | Redirect], dict[str, tuple[str, int]]]:
    rng = random.Random(11)
    links = "".join(
        f'<li><a href="{p}">{p}</a></li>'
        for p in [
            "/light/1.html",
            "/light/2.html",
            "/light/3.html",
            "/alley/1.html",
            "/alley/2.html",
            "/alley/3.html",
            "/other.html",
            "/news.html",
            "/quote.html",
            "/missing.html",
            "/excerpt.html",
        ]
    )
    broken = chapter_page("第二回", paragraphs_of(ALLEY[1]), template="p-paragraphs").body.decode()
    broken = broken.replace("</p>", "").replace("</div>", "", 2).replace("</body></html>", "<div><span>")
    excerpt = ALLEY[2][40:300]
    pages: dict[str, Page | Redirect] = {
        "/": Page.html(f"<html><body><h1>书友小说网</h1><ul>{links}</ul></body></html>"),
        "/light/1.html": chapter_page("第一章", paragraphs_of(LIGHT[0]), template="biquge"),
        "/light/2.html": chapter_page(
            "第二章", paragraphs_of(LIGHT[1]), encoding="gbk", header_charset=False
        ),
        "/light/3.html": chapter_page(
            "第三章", paragraphs_of(LIGHT[2]), encoding="big5", template="split-divs"
        ),
        "/alley/1.html": chapter_page(
            "第一回", paragraphs_of(homophone_swaps(ALLEY[0], 0.25, rng)), template="ad-inside"
        ),
        "/alley/2.html": Page.html(broken),
        "/alley/3.html": Redirect("/alley/3-moved.html"),
        "/alley/3-moved.html": chapter_page(
            "第三回", paragraphs_of(random_edits(ALLEY[2], 0.1, rng)), template="html5-article"
        ),
        "/other.html": chapter_page("雨夜来客", paragraphs_of(OTHER[0])),
        "/news.html": chapter_page(NEWS[0], NEWS[1:], template="html5-article"),
        "/quote.html": chapter_page("读书笔记", ["最近读到一句话：" + LIGHT[2][200:230], "推荐大家读原著。"]),
        "/excerpt.html": chapter_page(
            "老城区的手艺人", [NEWS[2], "网友转发：" + excerpt, NEWS[3]], template="html5-article"
        ),
    }
    expected = {
        "/light/1.html": ("灯塔守望人", 1),
        "/light/2.html": ("灯塔守望人", 2),
        "/light/3.html": ("灯塔守望人", 3),
        "/alley/1.html": ("青石巷", 1),
        "/alley/2.html": ("青石巷", 2),
        "/alley/3.html": ("青石巷", 3),
        "/excerpt.html": ("青石巷", 3),
    }
    return pages, expected
