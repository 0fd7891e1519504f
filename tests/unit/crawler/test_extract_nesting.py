"""Chapters whose paragraphs each open a ``<div>`` that is never closed, so that the parser nests every
paragraph inside the one before (a reader site seen in the wild, about 430 levels deep), and the layouts
where walking down into the main block is still right."""

from __future__ import annotations

import random

import pytest

from fptrack.crawler.extract import extract_main_text

# Made-up sentence parts, combined at random into paragraphs of varied length (short dialogue to long
# narration), so that no two levels of the chain look alike.
_WHO = ["他", "她", "老陈", "小满", "那个孩子", "王师傅", "我们几个", "邻居家的姑娘", "守夜的老人", "船夫"]
_DOES = [
    "慢慢走过", "抬头看着", "忽然想起了", "轻轻推开了", "收拾好了", "终于找到了", "绕过了", "守着",
    "数了数", "擦干净了", "悄悄藏起了", "又一次打量着",
]  # fmt: skip
_WHAT = [
    "院子里的石板路", "桌上那封旧信", "门口挂着的灯笼", "窗外的梧桐树", "村口那条小河", "厨房里的铁锅",
    "楼下的长椅", "抽屉里的钥匙", "墙角的一堆柴火", "码头边的渔船", "山坡上的茶园",
]  # fmt: skip
_THEN = [
    "心里有些发酸", "一句话也没说", "天色已经暗了下来", "远处传来几声狗叫", "风把门吹得吱呀作响",
    "雨点打在瓦片上", "灯芯噼啪响了一下", "谁也不知道该怎么开口", "屋里静得能听见钟摆的声音",
]  # fmt: skip
_SAID = ["“走吧。”", "“你听见了吗？”", "“别怕，我在这儿。”", "“明天再说吧。”", "“嗯。”"]


def _paragraph(rng: random.Random) -> str:
    if rng.random() < 0.15:
        return rng.choice(_SAID)
    clauses = [
        rng.choice(_WHO) + rng.choice(_DOES) + rng.choice(_WHAT) + "，" + rng.choice(_THEN) + "。"
        for _ in range(rng.randint(1, 4))
    ]
    return "".join(clauses)


def _chapter(count: int, seed: int = 19) -> list[str]:
    rng = random.Random(seed)
    return [_paragraph(rng) for _ in range(count)]


_NAV = (
    "<div class='nav'><a href='/'>首页</a> <a href='/xuanhuan/'>玄幻小说</a> "
    "<a href='/top/'>排行榜单</a> <a href='/full/'>完本小说</a></div>"
)
_SIDEBAR = (
    "<div class='side'><h3>热门推荐</h3><ul>"
    + "".join(f"<li><a href='/b/{n}/'>热门好书第{n}本</a></li>" for n in range(12))
    + "</ul></div>"
)
_CHROME = ["首页", "玄幻小说", "排行榜单", "完本小说", "热门推荐", "热门好书", "Copyright"]


def _kept_share(text: str, paragraphs: list[str]) -> float:
    lines = set(text.split("\n"))
    return sum(len(p) for p in paragraphs if p in lines) / sum(len(p) for p in paragraphs)


@pytest.mark.parametrize("levels", [430, 60, 5])
def test_a_chapter_of_never_closed_paragraph_divs_is_kept_whole(levels: int) -> None:
    paragraphs = _chapter(levels)
    chain = "".join(f"<div>{p}" for p in paragraphs)  # no closing tags: each paragraph nests the next
    html = (
        f"<html><head><title>第三章 夜雨_某书_书友网</title></head><body>{_NAV}{_SIDEBAR}"
        f"<div id=content>{chain}<div class='footer'>Copyright © 2024 书友网 All Rights Reserved.</div>"
        "</body></html>"
    )
    text = extract_main_text(html, "http://novel.test/3/3.html").text
    assert _kept_share(text, paragraphs) >= 0.95, text[:300]
    # Longer paragraphs are never lost (the walk may skip a short leading line of dialogue at most).
    assert [p for p in paragraphs if len(p) >= 15] == [p for p in text.split("\n") if len(p) >= 15]
    for fragment in _CHROME:
        assert fragment not in text, fragment


def test_the_chain_without_a_content_div_is_kept_whole_too() -> None:
    paragraphs = _chapter(430, seed=3)
    html = "<html><body>" + _NAV + "".join(f"<div>{p}" for p in paragraphs) + "</body></html>"
    text = extract_main_text(html).text
    assert _kept_share(text, paragraphs) >= 0.95
    assert "首页" not in text and "排行榜单" not in text


def test_the_chain_keeps_dropping_promotion_lines_inside_it() -> None:
    paragraphs = _chapter(200, seed=5)
    levels = [*paragraphs[:100], "本站无弹窗广告，请收藏本站", *paragraphs[100:]]
    html = "<html><body>" + _NAV + "<div id=content>" + "".join(f"<div>{p}" for p in levels)
    text = extract_main_text(html).text
    assert "请收藏本站" not in text
    assert _kept_share(text, paragraphs) >= 0.95


# ---------------------------------------------------------------- where walking down is still the right thing

_PROSE = _chapter(12, seed=11)
_LONG = [p for p in _PROSE if len(p) >= 15]


def test_a_header_and_a_nav_above_one_content_div_leave_only_the_content() -> None:
    html = (
        "<html><body><div class='wrap'><div class='header'><h1>书友网</h1><p>最好看的小说网站</p></div>"
        + _NAV
        + "<div id='content'>"
        + "<br>".join(_LONG)
        + "</div></div></body></html>"
    )
    assert extract_main_text(html).text.split("\n") == _LONG


def test_a_wrapper_sentence_above_a_p_paragraph_block_is_still_left_out() -> None:
    # The wrapper has a sentence of its own, but the content block holds its paragraphs in <p> children and
    # has no text of its own: not a chain, so the walk goes down to the chapter.
    html = (
        "<html><body><div class='box'>这本书讲的是一个小镇少女和一只流浪猫的故事，温暖又治愈。"
        "<div id='txt'>" + "".join(f"<p>{p}</p>" for p in _PROSE) + "</div></div></body></html>"
    )
    assert extract_main_text(html).text.split("\n") == _PROSE


def test_a_wrapper_sentence_above_a_br_paragraph_block_is_still_left_out() -> None:
    html = (
        "<html><body><div class='box'>作者：某某，更新时间：2024年3月1日，本章字数：三千。"
        "<div id='txt'>" + "<br>".join(_LONG) + "</div></div></body></html>"
    )
    assert extract_main_text(html).text.split("\n") == _LONG
