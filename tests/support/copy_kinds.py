"""Long chapters full of repeated lines, and the ways the benchmarks disguise a copy of one (passage tests).

A chapter here is the project's own demo prose (``cli/demo_data``) cut into sentences and dealt out at random,
with stock dialogue lines and phrases dealt in between, as novels repeat them ("“是。”王进道。"): repeated
k-grams are what made a verbatim copy's anchors jump between diagonals. Paragraphs are indented with "　　" as
registered texts often are. The copy kinds are those of ``benchmarks/pirate_web.py`` and
``tests/e2e/test_edit_kinds.py``, built with the benchmark's own generators where it has them.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable

from fptrack.benchmarks.pirate_web import (
    Homophones,
    hide_noise,
    paragraphs_of,
    pinyin_annotations,
    random_edits,
    sentence_rewrite,
    splice_ads,
)
from fptrack.cli.demo import DEMO_DATA

STOCK_LINES = (
    "“是。”王进道。",
    "“师父，小人不敢。”",
    "众人都道：“好！”",
    "他点了点头，没有说话。",
    "“你说什么？”",
    "灯塔的光照在海面上。",
    "只听得门外一声响，",
    "那人笑道：“不妨事。”",
    "雨还在下。",
    "她说：“我知道了。”",
    "老人叹了口气，说道：“也罢。”",
    "话说当日，",
)
CHROME_HEAD = "首页 > 小说 > 排行榜 > 灯塔守望人 全文阅读\n上一章　目录　下一章\n"
CHROME_TAIL = "\n上一章　返回目录　下一章\n本站所有小说均来自网友上传，如有侵权请联系删除。"

_SENTENCE = re.compile(r"[^。！？\n]+[。！？]")


def _sentences() -> list[str]:
    text = "".join((DEMO_DATA / name).read_text("utf-8") for name in ("lighthouse.txt", "alley.txt"))
    return [s.strip("\u3000 ") for s in _SENTENCE.findall(text) if len(s.strip("\u3000 ")) >= 8]


def vocabulary() -> str:
    """The Han characters of the demo prose (a pool for edits and noise)."""
    return "".join(sorted({ch for s in _sentences() for ch in s if "\u4e00" <= ch <= "\u9fff"}))


def long_chapter(seed: int, length: int = 12_000, *, stock_share: float = 0.35) -> str:
    """A chapter of at least ``length`` characters: a heading, then "　　"-indented paragraphs of demo
    sentences dealt at random (each is used several times over a long chapter) and stock lines."""
    rng = random.Random(seed)
    sentences = _sentences()
    pool = vocabulary()
    paragraphs: list[str] = []
    total = 0
    while total < length:
        parts = []
        for _ in range(rng.randint(2, 6)):
            roll = rng.random()
            if roll < stock_share:
                parts.append(rng.choice(STOCK_LINES))
            elif roll < stock_share + 0.3:
                parts.append(rng.choice(sentences))
            else:  # a sentence of its own, so most of the chapter is still unique
                parts.append("".join(rng.choice(pool) for _ in range(rng.randint(10, 40))) + "。")
        paragraph = "".join(parts)
        paragraphs.append("\u3000\u3000" + paragraph)
        total += len(paragraph) + 3
    return f"第{seed % 90 + 1}章 长夜\n" + "\n".join(paragraphs)


def body(chapter: str) -> list[str]:
    """The chapter's paragraphs, unindented, without its heading."""
    return paragraphs_of(chapter)[1:]


def _traditional(text: str) -> str:
    import opencc

    return str(opencc.OpenCC("s2t").convert(text))


def _full_width(text: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in text)


CopyKind = Callable[[str, str, random.Random], str]
"""(chapter, another chapter, rng) -> the page's main text (without its chrome)."""

VERBATIM_KINDS: dict[str, CopyKind] = {
    "verbatim": lambda c, _o, _r: "\n".join(body(c)),
    "indented": lambda c, _o, _r: "\n".join(paragraphs_of(c)[1:]).replace("\n", "\n\u3000\u3000"),
    "one_line": lambda c, _o, _r: "".join(body(c)),
    "traditional": lambda c, _o, _r: _traditional("\n".join(body(c))),
    "full_width": lambda c, _o, _r: _full_width("\n".join(body(c))),
    "punctuation": lambda c, _o, _r: "\n".join(body(c)).replace("，", ",").replace("。", ". "),
}
"""Copies that differ from the chapter only in what the matching ignores: one passage, no edits."""


def _shuffled(chapter: str, _other: str, rng: random.Random) -> str:
    paragraphs = body(chapter)
    rng.shuffle(paragraphs)
    return "\n".join(paragraphs)


def _interleaved(chapter: str, other: str, _rng: random.Random) -> str:
    mine, theirs = body(chapter), body(other)
    out = []
    for index, paragraph in enumerate(mine):
        out.append(paragraph)
        if index < len(theirs) and index % 3 == 2:
            out.append(theirs[index])
    return "\n".join(out)


def _news_excerpt(chapter: str, _other: str, rng: random.Random) -> str:
    text = "".join(body(chapter))
    start = rng.randrange(0, max(1, len(text) - 500))
    news = (DEMO_DATA / "library_news.txt").read_text("utf-8")
    return news[:300] + "\n网友转发：" + text[start : start + 400] + "\n" + news[300:600]


EDITED_KINDS: dict[str, CopyKind] = {
    "edits_5": lambda c, _o, r: "\n".join(body(random_edits(c, 0.05, r, vocabulary()))),
    "edits_15": lambda c, _o, r: "\n".join(body(random_edits(c, 0.15, r, vocabulary()))),
    "homophones_10": lambda c, _o, r: "\n".join(body(Homophones(set(vocabulary())).swap(c, 0.10, r))),
    "homophones_30": lambda c, _o, r: "\n".join(body(Homophones(set(vocabulary())).swap(c, 0.30, r))),
    "pinyin_annotated": lambda c, _o, r: "\n".join(body(pinyin_annotations(c, 0.08, r))),
    "ads_spliced": lambda c, _o, r: "\n".join(splice_ads(body(c), r)),
    "sentence_rewrite": lambda c, _o, r: "\n".join(body(sentence_rewrite(c, r))),
    "visible_noise": lambda c, _o, r: "\n".join(body(hide_noise(c, r, vocabulary()).replace("\ue000", ""))),
    "shuffled": _shuffled,
    "interleaved": _interleaved,
    "two_chapters": lambda c, o, _r: "\n".join(body(c) + body(o)),
    "excerpt_news": _news_excerpt,
}
"""Copies with real differences (edits, insertions, moved paragraphs) or only part of the chapter."""


def page_of(main_text: str) -> str:
    """The copy as a pirate page's text: site chrome around it."""
    return CHROME_HEAD + main_text + CHROME_TAIL
