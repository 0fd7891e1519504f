"""A pirate web built from ``../shared/corpus`` for ``benchmarks.accuracy.piracy`` (never used by tests).

What is registered: the ``tennessine`` copy of 西游记 and 三国演义, minus every chapter whose number ends in 7
(held out: their pages are hard negatives of the same work, same characters, same formulas). 水浒传 is not
registered at all (its pages are negatives of the same genre).

What is published, one page per line of :data:`KINDS` (pages spread over several pirate-site templates):

- real copies: the other copies of the registered novels as found in the corpus (``real_etext``: xstt5 /
  web-novel e-texts, ``real_rain8``: rain8 e-texts, ``pg_hant``: Project Gutenberg, Traditional, punctuation
  stripped, some chapters merged);
- synthetic copies of the registered originals: random edits at 5/10/15/20 % (modify, delete, insert, shift of
  1-3 character units), same-sound swaps at 10/30 % (homophone table from pypinyin over the corpus
  characters), Traditional served as Big5, injected pinyin annotations (``內(nèi)容``), ads spliced between
  and inside paragraphs (patterns of ``observed_piracy_artifacts.tsv``), shuffled paragraphs, GBK pages, a
  chapter split over two pages (each half is a page), two consecutive chapters on one page, an excerpt of
  600-1200 characters inside a news article;
- negatives: 水浒传 chapters (all four copies), held-out chapters of the registered novels (other copies),
  news articles, news quoting under 50 characters of a registered chapter, and the articles of a news portal
  whose template carries the same 250-character passage of a registered chapter on every page (boilerplate).
- near the thresholds, positives: excerpts of 250-400 characters inside a news article (``excerpt_short``), 30
  % random edits, same-sound swaps of half the characters, sentence-level rewrites (a sixth of the sentences
  deleted, storyteller fillers put in front of and inside a third of the others), and noise characters hidden
  by a CSS class (``<span class="kx">``, the class ``display: none`` in the page's style sheet) after every
  4-8 characters; the same noise hidden by a rule in an external style sheet (``css_external_noise``), which
  the crawler does not fetch, so the noise reaches the page text (drawn from its own random stream after every
  other page, so the other kinds' pages stay as they were);
- near the thresholds, negatives: reviews quoting 6-10 passages of 20-120 characters of one registered chapter
  with commentary between them, the chapter catalogue (目录) of a registered work, and fan fiction: 水浒传
  chapters with their heroes and places renamed to those of 西游记.

The registry also holds news articles (never published on the pirate web), one work per news category, so that
look-alikes are judged against some hundreds of unrelated chapters as well.

Ground truth of a page is the set of registered ``(work, chapter)`` it holds. For synthetic pages it is known
by construction. For real copies (whose chapter boundaries differ: Gutenberg merges chapters) it comes from an
oracle that knows both texts whole: a registered chapter is in the truth set when at least 25 % of its
character 8-grams (Traditional folded to Simplified by OpenCC, CJK only) occur in the page. A page holding
several chapters is correctly attributed when every chapter it is matched with is in its truth set."""

from __future__ import annotations

import html as html_lib
import json
import os
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from testbed.kana import kana_prose
from testbed.sites import Page, render_chapter

__all__ = [
    "CORPUS",
    "KINDS",
    "NEGATIVE_KINDS",
    "POSITIVE_KINDS",
    "PageSpec",
    "PirateWeb",
    "build_pirate_web",
    "oracle_text",
]

CORPUS = Path(os.environ.get("FPTRACK_CORPUS", Path(__file__).resolve().parents[2] / "shared" / "corpus"))
REGISTERED = ("xiyouji", "sanguoyanyi")
UNREGISTERED = ("shuihuzhuan",)
ORIGINAL_SOURCE = "tennessine"
HELD_OUT_DIGIT = 7
NEWS_ON_PAGES = 250
"""News articles (of the 858 over 300 characters) kept for pages: news negatives, hosts of excerpts, quotes
and reviews, the portal's articles. The other 750 articles, less those that share a run of
:data:`NEWS_OVERLAP` normalised characters with one of those (44 with seed 5), are registered, cut into
sections of at most :data:`NEWS_SECTION` characters at line ends or full stops, one work per category (seed 5:
1,592 sections; with the novels 1,790 registered chapters)."""
NEWS_SECTION = 600
NEWS_OVERLAP = 24  # the alignment's shortest run (CONTRACT.align.min_run)
_TITLES = {"xiyouji": "西游记", "sanguoyanyi": "三国演义"}
KANA_WORK, KANA_CHAPTERS = "kana", 24

POSITIVE_KINDS = (
    "real_etext",
    "real_rain8",
    "pg_hant",
    "edit_05",
    "edit_10",
    "edit_15",
    "edit_20",
    "homophone_10",
    "homophone_30",
    "big5_hant",
    "pinyin_annotated",
    "ads_spliced",
    "shuffled",
    "gbk",
    "split_half",
    "two_chapters",
    "excerpt_news",
    # near the thresholds
    "excerpt_short",
    "edit_30",
    "homophone_50",
    "sentence_rewrite",
    "css_hidden_noise",
    "css_external_noise",
    # a work in a script without pinyin
    "kana_excerpt",
)
_OWN_STREAM_KINDS = (
    "css_external_noise",
    "kana_excerpt",
)  # added later: drawn last, from their own random stream
NEGATIVE_KINDS = (
    "neg_unregistered_novel",
    "neg_heldout_chapter",
    "neg_news",
    "neg_short_quote",
    "neg_site_template",
    # near the thresholds
    "neg_review_quotes",
    "neg_catalogue",
    "neg_fan_fiction",
    "neg_kana_unregistered",
)
KINDS = POSITIVE_KINDS + NEGATIVE_KINDS

SITES = (
    ("biquge", "书友小说网"),
    ("p-paragraphs", "笔趣阁"),
    ("split-divs", "顶点小说"),
    ("ad-inside", "八一中文网"),
    ("html5-article", "全本书屋"),
    ("html5-article", "新闻门户"),  # a news portal whose template quotes a registered novel on every page
)
PIRATE_SITES = 5

# Ads as pirate sites splice them (observed_piracy_artifacts.tsv and common promo lines).
_ADS_BETWEEN = (
    "更多TXT电子书下载,请访问雨枫轩:http://www.rain8.com",
    "电子书版权为原出版社和作者所有",
    "输入：中华古籍oldbook.126.com",
    "天涯在线书库《www.tianyabook.com》",
    "----------------------- Page 12-----------------------",
    "更新时间:2007-11-16 7:55:51 本章字数:4804",
    "天才一秒记住本站地址：www.biquge-example.com。手机版阅读网址：m.biquge-example.com",
    "作品仅供读者预览,请在下载24小时内删除",
)
_ADS_INSIDE = (
    "小^说^无广告的~顶点*小说~网www.shuyaya.com",
    "看^书^神~站*最快~更新www.kanshu.la",
    "www.xstt5.com",
)


@dataclass(frozen=True)
class PageSpec:
    """One published page and what it really is."""

    path: str
    site: int
    kind: str
    positive: bool
    truth: frozenset[tuple[str, int]]
    body: bytes
    content_type: str
    excerpt_lines: tuple[str, ...] = ()  # excerpt kind: the copied lines as they appear on the page
    excerpt_work_span: tuple[int, int] | None = None  # excerpt kind: [start, end) in the registered work file


@dataclass
class PirateWeb:
    work_files: dict[str, str]  # work -> text registered (``fptrack works add``)
    work_titles: dict[str, str]
    chapter_titles: dict[tuple[str, str], int]  # (work, heading line) -> corpus chapter number
    sites: list[dict[str, Page]]
    pages: list[PageSpec] = field(default_factory=list)
    excluded: dict[str, int] = field(default_factory=dict)  # pages left out, with why


@dataclass(frozen=True)
class _Chapter:
    work: str
    source: str
    number: int
    title: str
    text: str


def _load(work: str, source: str) -> list[_Chapter]:
    path = CORPUS / "zh_novels" / f"{work}__{source}.jsonl"
    chapters = []
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            if row["title"].startswith("__") or len(row["text"]) < 500:
                continue  # front matter
            chapters.append(_Chapter(work, source, int(row["chapter"]), row["title"], row["text"]))
    return chapters


def _sources(work: str) -> list[str]:
    return sorted(p.name.split("__", 1)[1][:-6] for p in (CORPUS / "zh_novels").glob(f"{work}__*.jsonl"))


def _news() -> list[dict[str, str]]:
    with (CORPUS / "zh_news" / "thucnews_sample_1000.jsonl").open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


# ------------------------------------------------------------------------------------------------ oracle


@lru_cache(maxsize=1)
def _t2s():  # type: ignore[no-untyped-def]
    import opencc

    return opencc.OpenCC("t2s")


_NOT_CJK = re.compile(r"[^\u3400-\u9fff]+")


def oracle_text(text: str) -> str:
    """The oracle's view of a text: Simplified (OpenCC phrase conversion), CJK characters only."""
    return _NOT_CJK.sub("", _t2s().convert(text))


def _grams(text: str, k: int) -> set[int]:
    return {hash(text[i : i + k]) for i in range(len(text) - k + 1)}


class _Oracle:
    """Which registered chapters a text holds (>= 25 % of a chapter's 8-grams), and whether it shares a
    verbatim 50-character run with any of them."""

    def __init__(self, registered: dict[str, list[_Chapter]]) -> None:
        self.grams = {
            (c.work, c.number): _grams(oracle_text(c.text), 8) for cs in registered.values() for c in cs
        }
        self.long_grams: dict[str, set[int]] = {}
        for work, chapters in registered.items():
            merged: set[int] = set()
            for c in chapters:
                merged |= _grams(oracle_text(c.text), 50)
            self.long_grams[work] = merged

    def chapters_in(self, work: str, text: str) -> frozenset[tuple[str, int]]:
        page = _grams(oracle_text(text), 8)
        return frozenset(
            key
            for key, grams in self.grams.items()
            if key[0] == work and len(grams & page) >= 0.25 * len(grams)
        )

    def shares_long_run(self, text: str) -> bool:
        page = _grams(oracle_text(text), 50)
        return any(page & grams for grams in self.long_grams.values())


# ------------------------------------------------------------------------------------------------ edits


def _is_han(ch: str) -> bool:
    return "\u4e00" <= ch <= "\u9fff"


def random_edits(text: str, rate: float, rng: random.Random, pool: str) -> str:
    """Edit about ``rate`` of the Han characters in units of 1-3 characters: replace, delete, insert, or shift
    (swap with the next unit); the E-Simhash protocol's modify / delete / shift / replace."""
    chars = list(text)
    out: list[str] = []
    i = 0
    per_unit = rate / 2.0  # units average 2 characters
    while i < len(chars):
        ch = chars[i]
        if _is_han(ch) and rng.random() < per_unit:
            size = rng.randint(1, 3)
            unit = chars[i : i + size]
            op = rng.randrange(4)
            if op == 0:  # replace
                out.extend(rng.choice(pool) if _is_han(c) else c for c in unit)
            elif op == 1:  # delete
                out.extend(c for c in unit if not _is_han(c))
            elif op == 2:  # insert before the unit
                out.extend(rng.choice(pool) for _ in range(size))
                out.extend(unit)
            else:  # shift: swap with the next unit
                following = chars[i + size : i + 2 * size]
                out.extend(following)
                out.extend(unit)
                size += len(following)
            i += size
        else:
            out.append(ch)
            i += 1
    return "".join(out)


class Homophones:
    """Same-sound (toneless pinyin) character groups over a character set, from pypinyin."""

    def __init__(self, characters: set[str]) -> None:
        from pypinyin import Style, lazy_pinyin

        self.sound: dict[str, str] = {}
        groups: dict[str, list[str]] = {}
        for ch in sorted(characters):
            if _is_han(ch):
                syllable = lazy_pinyin(ch, style=Style.NORMAL)[0]
                self.sound[ch] = syllable
                groups.setdefault(syllable, []).append(ch)
        self.groups = groups

    def swap(self, text: str, rate: float, rng: random.Random) -> str:
        out = []
        for ch in text:
            others = self.groups.get(self.sound.get(ch, ""), ())
            if len(others) > 1 and rng.random() < rate:
                out.append(rng.choice([c for c in others if c != ch]))
            else:
                out.append(ch)
        return "".join(out)


def pinyin_annotations(text: str, rate: float, rng: random.Random) -> str:
    """Inject ``(pīn)`` annotations after a share of the Han characters, as in ``內(nèi)容``."""
    from pypinyin import Style, pinyin

    out = []
    for ch in text:
        out.append(ch)
        if _is_han(ch) and rng.random() < rate:
            out.append(f"({pinyin(ch, style=Style.TONE)[0][0]})")
    return "".join(out)


def splice_ads(paragraphs: list[str], rng: random.Random) -> list[str]:
    """Ads between paragraphs (every few paragraphs) and inside them (at a random character)."""
    out = []
    for index, paragraph in enumerate(paragraphs):
        if len(paragraph) > 40 and rng.random() < 0.3:
            cut = rng.randrange(10, len(paragraph) - 10)
            paragraph = paragraph[:cut] + rng.choice(_ADS_INSIDE) + paragraph[cut:]
        out.append(paragraph)
        if index % 4 == 1:
            out.append(rng.choice(_ADS_BETWEEN))
    return out


def paragraphs_of(text: str) -> list[str]:
    return [line.strip(" \t\u3000") for line in text.split("\n") if line.strip(" \t\u3000")]


def news_paragraphs(text: str) -> list[str]:
    """A news text as paragraphs: its lines, long lines cut after a full stop every ~150 characters."""
    out = []
    for line in paragraphs_of(text):
        while len(line) > 200:
            cut = line.find("。", 150)
            if cut < 0 or cut > len(line) - 20:
                break
            out.append(line[: cut + 1])
            line = line[cut + 1 :]
        out.append(line)
    return out


_FILLERS = ("话说", "只见", "却说", "原来", "不想", "且说", "正是", "忽然", "那时", "看官听说")
_SENTENCE_END = re.compile(r"(?<=[。！？])")


def sentence_rewrite(text: str, rng: random.Random) -> str:
    """Delete about a sixth of the sentences; put a storyteller's filler in front of a third of the others and
    a short aside inside a fifth of them."""
    out = []
    for line in paragraphs_of(text):
        sentences = [x for x in _SENTENCE_END.split(line) if x]
        kept = []
        for sentence in sentences:
            if len(sentences) > 1 and rng.random() < 1 / 6:
                continue
            if rng.random() < 1 / 3:
                sentence = rng.choice(_FILLERS) + "，" + sentence
            if len(sentence) > 12 and rng.random() < 0.2:
                cut = rng.randrange(4, len(sentence) - 4)
                sentence = sentence[:cut] + "，真个是" + rng.choice(_FILLERS[:4]) + "，" + sentence[cut:]
            kept.append(sentence)
        if kept:
            out.append("".join(kept))
    return "\n".join(out)


_NOISE_MARK = "\ue000"
_NOISE_CLASS = "kx"


def hide_noise(text: str, rng: random.Random, pool: str) -> str:
    """Put a noise character (marked for :func:`noise_as_hidden_spans`) after every 4-8 characters."""
    out = []
    countdown = rng.randint(4, 8)
    for ch in text:
        out.append(ch)
        if _is_han(ch):
            countdown -= 1
            if countdown == 0:
                out.append(_NOISE_MARK + rng.choice(pool))
                countdown = rng.randint(4, 8)
    return "".join(out)


def noise_as_hidden_spans(body: bytes, *, external: bool = False) -> bytes:
    """Turn the marked noise characters of a rendered UTF-8 page into spans of a class the style sheet hides:
    the page's own ``<style>``, or (``external``) a linked style sheet, which a crawler that does not fetch
    style sheets never sees."""
    html = body.decode("utf-8")
    html = re.sub(_NOISE_MARK + "(.)", f'<span class="{_NOISE_CLASS}">\\1</span>', html)
    rule = (
        '<link rel="stylesheet" href="/static/reader.css">'
        if external
        else f"<style>.{_NOISE_CLASS}{{display:none}}</style>"
    )
    html = html.replace("</head>", rule + "</head>", 1)
    return html.encode("utf-8")


# 水浒传's heroes and places renamed to 西游记's: fan fiction that reuses the registered work's names
_FAN_NAMES = (
    ("宋江", "唐僧"),
    ("李逵", "八戒"),
    ("武松", "悟空"),
    ("林冲", "沙僧"),
    ("鲁智深", "行者"),
    ("吴用", "观音"),
    ("晁盖", "如来"),
    ("梁山泊", "花果山"),
    ("梁山", "灵山"),
    ("东京", "长安"),
    ("高俅", "牛魔王"),
    ("柴进", "太白金星"),
    ("花荣", "哪吒"),
    ("戴宗", "土地"),
    ("卢俊义", "唐王"),
    ("公孙胜", "菩提祖师"),
    ("杨志", "二郎神"),
    ("史进", "红孩儿"),
    ("阮小二", "白骨精"),
    ("燕青", "玉帝"),
)


def fan_fiction(text: str) -> str:
    for old, new in _FAN_NAMES:
        text = text.replace(old, new)
    return text


# ------------------------------------------------------------------------------------------------ building


def build_pirate_web(*, quick: bool, seed: int = 5, per_kind: int = 4) -> PirateWeb:
    """The whole pirate web. ``quick`` publishes a sample (``per_kind`` chapters per kind and work, about
    twice as many negatives); below 4, the registered news works keep ``per_kind`` sections each."""
    if not (CORPUS / "zh_novels").is_dir():
        raise SystemExit(f"development corpus not found at {CORPUS} (set FPTRACK_CORPUS to its folder)")
    rng = random.Random(seed)
    originals = {w: _load(w, ORIGINAL_SOURCE) for w in REGISTERED}
    registered = {w: [c for c in cs if c.number % 10 != HELD_OUT_DIGIT] for w, cs in originals.items()}
    held_out = {w: {c.number for c in cs if c.number % 10 == HELD_OUT_DIGIT} for w, cs in originals.items()}

    work_files: dict[str, str] = {}
    chapter_offsets: dict[tuple[str, int], int] = {}
    chapter_titles: dict[tuple[str, str], int] = {}
    for work, chapters in registered.items():
        parts = [_TITLES[work] + "\n\n"]
        length = len(parts[0])
        for c in chapters:
            heading = c.title.strip() + "\n"
            parts.append(heading)
            length += len(heading)
            chapter_offsets[(work, c.number)] = length
            parts.append(c.text + "\n\n")
            length += len(c.text) + 2
            chapter_titles[(work, c.title.strip())] = c.number
        work_files[work] = "".join(parts)

    all_news = _news()
    news_rows = [n for n in all_news if len(n["text"]) > 300]
    rng.shuffle(news_rows)
    news_texts = [n["text"] for n in news_rows[:NEWS_ON_PAGES]]  # published on pages, never registered
    titles = dict(_TITLES)
    by_category: dict[str, list[str]] = {}
    on_pages = {id(n) for n in news_rows[:NEWS_ON_PAGES]}
    # an article sharing a run of NEWS_OVERLAP normalised characters with one published on the pirate web (a
    # news source's template, a republished story, a price list) would make that page a true copy, not a
    # negative: not registered. The product's normalisation, so runs with digits and Latin letters count as
    # the alignment sees them.
    from fptrack.fingerprint.normalize import normalize

    published: set[int] = set()
    for text in news_texts:
        published |= _grams(normalize(text).text, NEWS_OVERLAP)
    for row in all_news:
        if id(row) not in on_pages and not (_grams(normalize(row["text"]).text, NEWS_OVERLAP) & published):
            by_category.setdefault(row["category"], []).extend(_sections(row["text"], NEWS_SECTION))
    for number, (category, texts) in enumerate(sorted(by_category.items())):
        if quick and per_kind < 4:  # a smoke run: a token of each news work (never on pages: registry bulk)
            texts = texts[:per_kind]
        work = f"news{number}"
        titles[work] = f"新闻选编·{category}"
        parts = [titles[work] + "\n\n"]
        for index, text in enumerate(texts, 1):
            heading = f"第{index}章 {_NOT_CJK.sub('', text)[:16]}"
            chapter_titles[(work, heading)] = index
            parts.append(heading + "\n" + text.strip() + "\n\n")
        work_files[work] = "".join(parts)
    # a work in kana (generated, testbed.kana), registered last: its own stream, the other works
    # unchanged
    kana_rng = random.Random(f"{seed}-kana-work")
    titles[KANA_WORK] = "かなのものがたり"
    parts = [titles[KANA_WORK] + "\n\n"]
    kana_chapters: list[_Chapter] = []
    for number in range(1, KANA_CHAPTERS + 1):
        heading = f"第{number}章 かな{number}"
        chapter_titles[(KANA_WORK, heading)] = number
        body = kana_prose(kana_rng, kana_rng.randint(1200, 2400))
        offset = sum(map(len, parts)) + len(heading) + 1
        chapter_offsets[(KANA_WORK, number)] = offset
        kana_chapters.append(_Chapter(KANA_WORK, "generated", number, heading, body))
        parts.append(heading + "\n" + body + "\n\n")
    work_files[KANA_WORK] = "".join(parts)
    pool = "".join(sorted({ch for cs in registered.values() for c in cs for ch in c.text if _is_han(ch)}))
    homophones = Homophones(set(pool) | {ch for t in news_texts[:200] for ch in t})
    oracle = _Oracle(registered)

    web = PirateWeb(work_files, titles, chapter_titles, [{} for _ in SITES])
    per_kind = per_kind if quick else 30
    counter = [0]

    def publish(
        kind: str,
        title: str,
        paragraphs: Sequence[str],
        truth: frozenset[tuple[str, int]],
        *,
        encoding: str = "utf-8",
        template: int | None = None,
        hidden_noise: bool = False,
        external_style: bool = False,
        **extra: Any,
    ) -> None:
        counter[0] += 1
        site = counter[0] % PIRATE_SITES if template is None else template
        path = f"/{kind}/{counter[0]}.html"
        body = render_chapter(
            title, list(paragraphs), template=SITES[site][0], encoding=encoding, site_name=SITES[site][1]
        )
        if hidden_noise:
            body = noise_as_hidden_spans(body, external=external_style)
        web.sites[site][path] = Page(body, content_type=f"text/html; charset={encoding}")
        web.pages.append(
            PageSpec(
                path,
                site,
                kind,
                kind in POSITIVE_KINDS,
                truth,
                body,
                f"text/html; charset={encoding}",
                **extra,
            )
        )

    def sample(chapters: list[_Chapter], n: int) -> list[_Chapter]:
        return chapters if len(chapters) <= n else rng.sample(chapters, n)

    # --- real copies of the registered novels
    for work in REGISTERED:
        for source in _sources(work):
            if source == ORIGINAL_SOURCE:
                continue
            kind = (
                "pg_hant" if source.startswith("pg_") else "real_rain8" if "rain8" in source else "real_etext"
            )
            everything = _load(work, source)
            held = [c for c in everything if c.number in held_out[work]]
            chapters = [c for c in everything if c.number not in held_out[work]]
            if quick:
                chapters, held = sample(chapters, per_kind), sample(held, 2)
            for c in chapters + held:
                truth = oracle.chapters_in(work, c.text)
                if truth:
                    publish(kind, c.title, paragraphs_of(c.text), truth)
                elif c.number in held_out[work] and not oracle.shares_long_run(c.text):
                    publish("neg_heldout_chapter", c.title, paragraphs_of(c.text), frozenset())
                else:
                    web.excluded[f"{kind}: no registered chapter found by the oracle"] = (
                        web.excluded.get(f"{kind}: no registered chapter found by the oracle", 0) + 1
                    )

    # --- synthetic copies of the registered originals
    for work in REGISTERED:
        chapters = registered[work]
        numbers = {c.number for c in chapters}
        for kind in POSITIVE_KINDS[3:]:
            if kind in _OWN_STREAM_KINDS:
                continue
            for c in sample(chapters, per_kind):
                truth = frozenset({(work, c.number)})
                paragraphs = paragraphs_of(c.text)
                if kind.startswith("edit_"):
                    rate = int(kind[5:]) / 100
                    publish(kind, c.title, paragraphs_of(random_edits(c.text, rate, rng, pool)), truth)
                elif kind.startswith("homophone_"):
                    rate = int(kind[10:]) / 100
                    publish(kind, c.title, paragraphs_of(homophones.swap(c.text, rate, rng)), truth)
                elif kind == "big5_hant":
                    publish(kind, c.title, paragraphs, truth, encoding="big5")
                elif kind == "gbk":
                    publish(kind, c.title, paragraphs, truth, encoding="gbk")
                elif kind == "pinyin_annotated":
                    publish(kind, c.title, paragraphs_of(pinyin_annotations(c.text, 0.08, rng)), truth)
                elif kind == "ads_spliced":
                    publish(kind, c.title, splice_ads(paragraphs, rng), truth)
                elif kind == "shuffled":
                    shuffled = paragraphs[:]
                    rng.shuffle(shuffled)
                    publish(kind, c.title, shuffled, truth)
                elif kind == "split_half":
                    half = len(paragraphs) // 2
                    publish(kind, c.title + "（上）", paragraphs[:half], truth)
                    publish(kind, c.title + "（下）", paragraphs[half:], truth)
                elif kind == "two_chapters":
                    following = next((d for d in chapters if d.number == c.number + 1), None)
                    if following is None or following.number not in numbers:
                        continue
                    publish(
                        kind,
                        f"{c.title} / {following.title}",
                        paragraphs + [following.title] + paragraphs_of(following.text),
                        frozenset({(work, c.number), (work, following.number)}),
                    )
                elif kind == "excerpt_news":
                    _publish_excerpt(publish, rng, work, c, news_texts, chapter_offsets)
                elif kind == "excerpt_short":
                    _publish_excerpt(publish, rng, work, c, news_texts, chapter_offsets, kind, (250, 400))
                elif kind == "sentence_rewrite":
                    publish(kind, c.title, paragraphs_of(sentence_rewrite(c.text, rng)), truth)
                elif kind == "css_hidden_noise":
                    publish(
                        kind, c.title, paragraphs_of(hide_noise(c.text, rng, pool)), truth, hidden_noise=True
                    )

    # --- negatives
    unregistered = [c for w in UNREGISTERED for s in _sources(w) for c in _load(w, s)]
    for c in sample(unregistered, 2 * per_kind if quick else 200):
        publish("neg_unregistered_novel", c.title, paragraphs_of(c.text), frozenset())
    for text in news_texts[: 2 * per_kind if quick else 100]:
        lines = news_paragraphs(text)
        publish("neg_news", lines[0][:40], lines, frozenset(), template=4)
    quote_news = news_texts[100 : 100 + (2 * per_kind if quick else 60)]
    for text in quote_news:
        work = rng.choice(REGISTERED)
        c = rng.choice(registered[work])
        body = oracle_text(c.text)
        length = rng.randint(20, 45)
        start = rng.randrange(0, max(1, len(body) - length))
        lines = news_paragraphs(text)
        lines.insert(min(2, len(lines)), f"正如古典小说里写的：“{body[start : start + length]}”，令人感慨。")
        publish("neg_short_quote", lines[0][:40], lines, frozenset(), template=4)

    # a news portal that puts the same 250-character passage of a registered chapter (an "editor's pick") at
    # the top of every article: its template, not a copy on any one page
    pick_chapter = registered[REGISTERED[1]][0]
    pick_text = pick_chapter.text.strip()
    pick = paragraphs_of(pick_text[:260])
    for text in news_texts[220 : 220 + (10 if quick else 30)]:
        lines = news_paragraphs(text)
        publish("neg_site_template", lines[0][:40], ["编者推荐：", *pick, *lines], frozenset(), template=5)

    # --- near the thresholds: reviews quoting many short passages, catalogues, fan fiction
    for text in news_texts[160 : 160 + (2 * per_kind if quick else 60)]:
        work = rng.choice(REGISTERED)
        c = rng.choice(registered[work])
        body = "".join(paragraphs_of(c.text))
        lines = news_paragraphs(text)
        review = ["书评：重读" + titles[work] + "，" + c.title.strip(), *lines[:2]]
        quotes = rng.randint(6, 10)
        slot = len(body) // quotes  # one passage per slot of the chapter: distinct passages, never adjacent
        for number in range(quotes):
            length = rng.randint(20, max(20, min(120, slot - 50)))
            start = number * slot + rng.randrange(max(1, slot - length - 50))
            passage = body[start : start + length]
            comment = (
                lines[2 + number % max(1, len(lines) - 2)]
                if len(lines) > 2
                else "此处写得极好，人物神态跃然纸上，读来令人拍案叫绝。"
            )
            review.append(
                f"书中写道：“{passage}”这一段{rng.choice(('笔力雄健', '耐人寻味', '颇见功力'))}。{comment}"
            )
        publish("neg_review_quotes", review[0][:40], review, frozenset(), template=4)
    for work in REGISTERED:
        headings = [c.title.strip() for c in registered[work]]
        for start in range(0, len(headings), 40 if quick else 20):
            publish("neg_catalogue", titles[work] + " 目录", headings[start : start + 40], frozenset())
            if quick:
                break
    hall = [
        c for c in _load("shuihuzhuan", ORIGINAL_SOURCE) if any(old in c.text for old, _ in _FAN_NAMES[:6])
    ]
    for c in sample(hall, 2 * per_kind if quick else 60):
        publish("neg_fan_fiction", fan_fiction(c.title), paragraphs_of(fan_fiction(c.text)), frozenset())

    # --- kinds added later, from their own stream: every page above is the same with or without them
    late = random.Random(f"{seed}-late-kinds")
    for work in REGISTERED:
        for c in late.sample(registered[work], min(per_kind, len(registered[work]))):
            truth = frozenset({(work, c.number)})
            noisy = paragraphs_of(hide_noise(c.text, late, pool))
            publish("css_external_noise", c.title, noisy, truth, hidden_noise=True, external_style=True)
    # excerpts of the kana work inside news articles, and kana prose that is not registered
    for c in late.sample(kana_chapters, min(2 * per_kind, len(kana_chapters))):
        _publish_excerpt(publish, late, KANA_WORK, c, news_texts, chapter_offsets, "kana_excerpt", (300, 600))
    for number in range(2 * per_kind):
        publish(
            "neg_kana_unregistered", f"かな{number}", news_paragraphs(kana_prose(late, 1800)), frozenset()
        )

    for site, pages in enumerate(web.sites):
        links = "".join(f'<li><a href="{path}">{path}</a></li>' for path in sorted(pages))
        listing = (
            f"<html><head><meta charset='utf-8'><title>{SITES[site][1]}</title></head>"
            f"<body><ul>{links}</ul></body></html>"
        )
        pages["/"] = Page.html(listing)
    return web


def _publish_excerpt(
    publish: Callable[..., None],
    rng: random.Random,
    work: str,
    c: _Chapter,
    news_texts: list[str],
    chapter_offsets: dict[tuple[str, int], int],
    kind: str = "excerpt_news",
    lengths: tuple[int, int] = (600, 1200),
) -> None:
    text = c.text
    length = rng.randint(*lengths)
    if len(text) < length + 20:
        return
    start = rng.randrange(0, len(text) - length)
    # start and end on a character that survives extraction (not whitespace), so the truth span is exact
    while start < len(text) and not text[start].strip():
        start += 1
    end = start + length
    while end > start and not text[end - 1].strip():
        end -= 1
    excerpt = text[start:end]
    lines = paragraphs_of(excerpt)
    news = news_paragraphs(rng.choice(news_texts))
    paragraphs = news[:2] + ["网友转发了小说中的一段："] + lines + news[2:]
    offset = chapter_offsets[(work, c.number)]
    publish(
        kind,
        news[0][:40],
        paragraphs,
        frozenset({(work, c.number)}),
        template=4,
        excerpt_lines=tuple(lines),
        excerpt_work_span=(offset + start, offset + end),
    )


def _sections(text: str, limit: int) -> list[str]:
    """``text`` cut at line ends (long lines at a full stop, :func:`news_paragraphs`) into pieces of at most
    ``limit`` characters (a longer line is one piece)."""
    pieces: list[str] = []
    current = ""
    for line in news_paragraphs(text):
        if current and len(current) + len(line) > limit:
            pieces.append(current)
            current = ""
        current = f"{current}\n{line}" if current else line
    if current:
        pieces.append(current)
    return pieces


def escape(text: str) -> str:
    return html_lib.escape(text)
