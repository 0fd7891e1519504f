"""The generated pirate site of ``benchmarks.pipeline.throughput``: a registry, a site of chapter pages
around it, and the ground truth (which page copies which registered chapter).

Text comes from :class:`TextPools`: :func:`corpus_pools` reads ``../shared/corpus`` (``FPTRACK_CORPUS``), and
:func:`generated_pools` makes random Han text for the tests, which never need the corpus.

- **Registered side**: the ``tennessine`` copies of 西游记 and 三国演义, cut at paragraph ends into pieces of
  about ``chapter_chars`` characters. A registry larger than those pieces is filled with chapters synthesised
  from their clauses (:class:`ClauseStream`).
- **Unrelated side**: 水浒传 (``tennessine``, never registered) cut the same way, THUCNews articles grouped
  into pages of about the same size, and pages synthesised from the clauses of both.
- Half of the chapter pages copy a registered chapter (round robin over the registry, so no chapter is copied
  more than ``ceil(copies / registry)`` times): verbatim, with random edits at 5 % and 10 % of the Han
  characters, with ads spliced in, or served as GBK. The other half are unrelated text.

The site: ``/`` links to index pages ``/list/<k>.html`` of ``links_per_index`` chapter pages each, chapter
pages are ``/book/<n>.html`` in a shuffled order (copies and unrelated pages interleave), each with links to
the previous and next chapter page. Every page carries the same navigation bar and footer. A breadth-first
crawl with ``--depth 2`` reaches every page: ``/`` (0), the index pages (1), the chapter pages (2).
"""

from __future__ import annotations

import html as html_lib
import json
import math
import random
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.pirate_web import news_paragraphs, paragraphs_of, random_edits, splice_ads
from testbed.sites import Page

__all__ = [
    "COPY_KINDS",
    "SITE_NAME",
    "UNRELATED_KINDS",
    "ClauseStream",
    "PipelineSite",
    "RegisteredChapter",
    "SitePage",
    "TextPools",
    "build_site",
    "corpus_pools",
    "generated_pools",
    "synthetic_work",
]

SITE_NAME = "笔趣看书网"
# One cycle of ten copies: what share of the copies is of each kind.
COPY_CYCLE = (
    "verbatim",
    "edit_05",
    "verbatim",
    "edit_10",
    "ads_spliced",
    "verbatim",
    "edit_05",
    "gbk",
    "edit_10",
    "verbatim",
)
COPY_KINDS = tuple(dict.fromkeys(COPY_CYCLE))
UNRELATED_KINDS = ("unregistered_novel", "news", "synthetic_unrelated")
_EDIT_RATES = {"edit_05": 0.05, "edit_10": 0.10}
_CLAUSE = re.compile(r"[^，。！？；：,.!?;:\n]+[，。！？；：,.!?;:]?")
_CLOSING = "。！？"
_QUOTES = str.maketrans("", "", '“”‘’「」『』"')
_SUBSTITUTION_BAND = 16
_HEADING_LIKE = re.compile(
    r"^\s*(?:第[0-9０-９一二三四五六七八九十百千万零〇两壹贰叁肆伍陆柒捌玖拾佰仟]+[章回节節卷集篇部]"
    r"|楔子|序章|序言|引子|尾声|尾聲|后记|後記|番外|chapter\s+(?:\d+|[ivxlcdm]+)\b)",
    re.IGNORECASE,
)


def _is_han(ch: str) -> bool:
    return "\u4e00" <= ch <= "\u9fff"


# ------------------------------------------------------------------------------------------------ text pools


@dataclass(frozen=True)
class TextPools:
    """Where the site's text comes from. Documents are ``(label, paragraphs)`` of about ``chapter_chars``."""

    registered_documents: list[tuple[str, list[str]]]
    registered_clauses: list[str]
    unrelated_novel: list[tuple[str, list[str]]]
    unrelated_news: list[tuple[str, list[str]]]
    unrelated_clauses: list[str]
    han: str  # the Han characters of the text: what random edits insert
    source: str  # "corpus at <path>" or "generated"


def clauses_of(paragraphs: Sequence[str]) -> list[str]:
    """A text cut after every clause-ending punctuation mark (the mark stays with its clause)."""
    out: list[str] = []
    for paragraph in paragraphs:
        # quotation marks dropped: a shuffled clause would open or close a quotation at random
        clauses = (m.group(0).translate(_QUOTES).strip() for m in _CLAUSE.finditer(paragraph))
        out.extend(c for c in clauses if len(c) >= 2)
    return out


def pieces_of(paragraphs: Sequence[str], chapter_chars: int) -> list[list[str]]:
    """Consecutive paragraphs grouped into pieces of at least ``chapter_chars`` characters; a remainder under
    half of that joins the last piece, a text under half of it is no piece."""
    pieces: list[list[str]] = []
    current: list[str] = []
    size = 0
    for paragraph in paragraphs:
        current.append(paragraph)
        size += len(paragraph)
        if size >= chapter_chars:
            pieces.append(current)
            current, size = [], 0
    if current:
        if size >= chapter_chars // 2 or not pieces:
            pieces.append(current)
        else:
            pieces[-1].extend(current)
    return [p for p in pieces if sum(map(len, p)) >= chapter_chars // 2]


def _body_paragraphs(text: str) -> list[str]:
    """A chapter's paragraphs without lines that read like chapter headings (they would split the registered
    work differently from what the ground truth says)."""
    return [p for p in paragraphs_of(text) if not _HEADING_LIKE.match(p)]


def _jsonl(path: Path) -> Iterator[dict[str, str]]:
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            yield json.loads(line)


def _novel_pieces(corpus: Path, work: str, chapter_chars: int) -> list[tuple[str, list[str]]]:
    out = []
    for row in _jsonl(corpus / "zh_novels" / f"{work}__tennessine.jsonl"):
        if str(row["title"]).startswith("__"):
            continue  # front matter
        for part, piece in enumerate(pieces_of(_body_paragraphs(str(row["text"])), chapter_chars), 1):
            out.append((f"{work} {row['chapter']}.{part}", piece))
    return out


def corpus_pools(corpus: Path, *, chapter_chars: int = 5000) -> TextPools:
    """Pools from the development corpus (see the module docstring)."""
    if not (corpus / "zh_novels").is_dir():
        raise SystemExit(f"development corpus not found at {corpus} (set FPTRACK_CORPUS to its folder)")
    registered = _novel_pieces(corpus, "xiyouji", chapter_chars) + _novel_pieces(
        corpus, "sanguoyanyi", chapter_chars
    )
    novel = _novel_pieces(corpus, "shuihuzhuan", chapter_chars)
    articles = [
        news_paragraphs(str(r["text"])) for r in _jsonl(corpus / "zh_news" / "thucnews_sample_1000.jsonl")
    ]
    articles = [a for a in articles if a]
    news = [
        (f"news {i}", piece)
        for i, piece in enumerate(pieces_of([p for a in articles for p in a], chapter_chars))
    ]
    registered_clauses = clauses_of([p for _, doc in registered for p in doc])
    unrelated_clauses = clauses_of([p for _, doc in novel + news for p in doc])
    han = "".join(sorted({ch for c in registered_clauses + unrelated_clauses for ch in c if _is_han(ch)}))
    return TextPools(
        registered, registered_clauses, novel, news, unrelated_clauses, han, f"corpus at {corpus}"
    )


def generated_pools(*, seed: int = 1, clauses: int = 4000) -> TextPools:
    """Random Han text (no corpus): clauses of 3-18 characters from 2,000 CJK code points. For tests."""
    rng = random.Random(seed)
    han = "".join(chr(0x4E00 + i) for i in range(0, 6000, 3))

    def clause() -> str:
        return "".join(rng.choice(han) for _ in range(rng.randint(3, 18))) + rng.choice("，，，。！？；")

    return TextPools(
        [], [clause() for _ in range(clauses)], [], [], [clause() for _ in range(clauses)], han, "generated"
    )


class ClauseStream:
    """Clauses of a pool in shuffled order, one epoch after another, for synthesising text.

    Each epoch is a fresh shuffle of the whole pool, so a clause comes back only once the pool is used up.
    From epoch 1 on, every Han character goes through a random substitution drawn for that epoch (a fixed
    table per epoch; characters trade places only with characters of similar frequency in the pool): text
    synthesised past the size of the pool keeps the clause lengths, punctuation and character frequencies of
    the corpus but does not repeat earlier epochs verbatim, which would make every clause a "formula" held by
    many registered chapters. ``first_epoch=1`` skips the plain epoch (when the pool's own documents are used
    verbatim elsewhere).
    """

    def __init__(self, clauses: Sequence[str], *, seed: int, first_epoch: int = 0) -> None:
        if not clauses:
            raise ValueError("ClauseStream needs at least one clause")
        self._clauses = list(clauses)
        self._seed = seed
        self.first_epoch = first_epoch
        frequency = Counter(ch for c in self._clauses for ch in c if _is_han(ch))
        self._han = sorted(frequency, key=lambda ch: (-frequency[ch], ch))  # most frequent first
        self.epoch = first_epoch - 1
        self._order: list[int] = []
        self._table: dict[int, str] = {}
        self._next_epoch()
        self.drawn_chars = 0

    @property
    def epochs_used(self) -> int:
        """Epochs begun so far (0 before the first clause is drawn)."""
        return self.epoch - self.first_epoch + 1 if self.drawn_chars else 0

    @property
    def pool_chars(self) -> int:
        return sum(map(len, self._clauses))

    def _next_epoch(self) -> None:
        self.epoch += 1
        rng = random.Random(f"{self._seed}:{self.epoch}")
        self._order = list(range(len(self._clauses)))
        rng.shuffle(self._order)
        if self.epoch == 0:
            self._table = {}
        else:
            # characters trade places only within bands of similar frequency: common stay common
            target: list[str] = []
            for start in range(0, len(self._han), _SUBSTITUTION_BAND):
                band = self._han[start : start + _SUBSTITUTION_BAND]
                rng.shuffle(band)
                target.extend(band)
            self._table = {ord(a): b for a, b in zip(self._han, target, strict=True)}

    def clause(self) -> str:
        if not self._order:
            self._next_epoch()
        text = self._clauses[self._order.pop()]
        text = text.translate(self._table) if self._table else text
        self.drawn_chars += len(text)
        return text

    def paragraphs(self, chars: int, rng: random.Random) -> list[str]:
        """Paragraphs of 80-300 characters, about ``chars`` in all, each ending with a full stop."""
        out: list[str] = []
        total = 0
        while total < chars:
            target = rng.randint(80, 300)
            parts: list[str] = []
            size = 0
            while size < target:
                part = self.clause()
                parts.append(part)
                size += len(part)
            paragraph = "".join(parts)
            if paragraph[-1] not in _CLOSING:
                paragraph = paragraph[:-1] + "。" if not paragraph[-1].isalnum() else paragraph + "。"
            out.append(paragraph)
            total += len(paragraph)
        return out


# ------------------------------------------------------------------------------------------------ registry


@dataclass(frozen=True)
class RegisteredChapter:
    """Chapter ``index`` (numbered by the registry, from 1) of ``work_title``: its heading line and body."""

    work_title: str
    index: int
    heading: str
    paragraphs: tuple[str, ...]
    origin: str  # "corpus" or "synthetic"

    @property
    def key(self) -> tuple[str, int]:
        return (self.work_title, self.index)


def work_title(number: int) -> str:
    return f"基准小说{number:03d}"


def work_file_text(title: str, chapters: Sequence[RegisteredChapter]) -> str:
    """The text file of a work: its title line, then every chapter as a heading line and its paragraphs."""
    parts = [title, ""]
    for chapter in chapters:
        parts.append(chapter.heading)
        parts.extend(chapter.paragraphs)
        parts.append("")
    return "\n".join(parts) + "\n"


def synthetic_work(
    stream: ClauseStream, rng: random.Random, *, chapters: int, chapter_chars: int, title: str
) -> tuple[str, list[RegisteredChapter]]:
    """A work of synthesised chapters (headings 第N章) and its text file."""
    out = [
        RegisteredChapter(
            title, n, f"第{n}章 {title}之{n}", tuple(stream.paragraphs(chapter_chars, rng)), "synthetic"
        )
        for n in range(1, chapters + 1)
    ]
    return work_file_text(title, out), out


# ------------------------------------------------------------------------------------------------ the site


@dataclass(frozen=True)
class SitePage:
    """A chapter page; ``truth`` is the registered chapter it copies (``None``: unrelated text)."""

    path: str
    kind: str
    title: str
    truth: tuple[str, int] | None
    encoding: str


@dataclass
class PipelineSite:
    works: list[tuple[str, str]]  # (title, text file) in registration order
    chapters: list[RegisteredChapter]
    chapter_pages: list[SitePage]
    pages: dict[str, Page]  # every path served (chapter pages, index pages, "/")
    index_paths: list[str]
    depth: int = 2
    notes: dict[str, object] = field(default_factory=dict)

    def expected_copies(self) -> set[tuple[str, str, int]]:
        """``(path, work title, chapter index)`` of every copy on the site."""
        return {(p.path, *p.truth) for p in self.chapter_pages if p.truth is not None}

    def counts(self) -> dict[str, int]:
        """Chapter pages per kind, plus ``copies``, ``unrelated``, ``chapter_pages``, ``index_pages`` and
        ``registered_chapters``."""
        kinds = Counter(p.kind for p in self.chapter_pages)
        copies = sum(p.truth is not None for p in self.chapter_pages)
        return {
            **dict(sorted(kinds.items())),
            "copies": copies,
            "unrelated": len(self.chapter_pages) - copies,
            "chapter_pages": len(self.chapter_pages),
            "index_pages": len(self.index_paths) + 1,
            "registered_chapters": len(self.chapters),
        }


_NAV = (
    '<div class="nav"><a href="/">首页</a> <a href="/list/1.html">最新更新</a> '
    f'<span class="site">{SITE_NAME}</span> <span class="search">搜索小说、作者</span></div>'
)
_FOOTER = (
    '<div class="footer"><p>本站所有小说为转载作品，'
    "所有章节均由网友上传，转载至本站只是为了宣传本书让更多读者欣赏。</p>"
    f"<p>Copyright &copy; 2024 {SITE_NAME} All Rights Reserved. 备案号：京ICP备00000000号</p></div>"
)
_PROMO = f"天才一秒记住本站地址：www.biquge-bench.com。{SITE_NAME}手机版阅读网址：m.biquge-bench.com"


def _document(title: str, body: str, encoding: str) -> bytes:
    markup = (
        "<!DOCTYPE html><html><head>"
        f'<meta http-equiv="Content-Type" content="text/html; charset={encoding}" />'
        f"<title>{html_lib.escape(title)}_{SITE_NAME}</title></head><body>{_NAV}{body}{_FOOTER}</body></html>"
    )
    return markup.encode(encoding, errors="xmlcharrefreplace")


def render_chapter_page(
    title: str, paragraphs: Sequence[str], *, prev: str, next_: str, index: str, encoding: str = "utf-8"
) -> bytes:
    """A chapter page: navigation, heading, a bar of previous / contents / next links, the text (paragraphs
    separated by ``<br />``, a site promotion line first, as biquge-style sites do), the bar again, the
    footer."""
    bar = (
        f'<div class="bottem"><a href="{prev}">上一章</a> &larr; <a href="{index}">章节目录</a> &rarr; '
        f'<a href="{next_}">下一章</a></div>'
    )
    text = "<br /><br />".join("&nbsp;&nbsp;&nbsp;&nbsp;" + html_lib.escape(p) for p in paragraphs)
    body = (
        f'<div class="content_read"><div class="bookname"><h1>{html_lib.escape(title)}</h1>{bar}</div>'
        f'<div id="content">{_PROMO}<br /><br />{text}</div>{bar}</div>'
    )
    return _document(title, body, encoding)


def render_index_page(title: str, links: Sequence[tuple[str, str]], *, extra: str = "") -> bytes:
    items = "".join(f'<li><a href="{path}">{html_lib.escape(label)}</a></li>' for path, label in links)
    return _document(
        title,
        f'<div class="listmain"><h2>{html_lib.escape(title)}</h2><ul>{items}</ul>{extra}</div>',
        "utf-8",
    )


def build_site(
    pools: TextPools,
    *,
    pages: int,
    registry: int,
    chapters_per_work: int = 200,
    chapter_chars: int = 5000,
    links_per_index: int = 100,
    seed: int = 9,
) -> PipelineSite:
    """The registry (``registry`` chapters in works of ``chapters_per_work``) and a site of ``pages`` chapter
    pages, half of them (rounded down) copies of registered chapters."""
    if pages < 2 or registry < 1:
        raise ValueError(
            f"need at least 2 pages and 1 registered chapter (got pages={pages}, registry={registry})"
        )
    rng = random.Random(seed)

    # --- the registry: corpus pieces first, then synthesised chapters
    real = pools.registered_documents[:registry]
    stream = ClauseStream(pools.registered_clauses, seed=seed, first_epoch=1 if real else 0)
    bodies: list[tuple[list[str], str]] = [(doc, "corpus") for _, doc in real]
    while len(bodies) < registry:
        bodies.append((stream.paragraphs(chapter_chars, rng), "synthetic"))
    chapters: list[RegisteredChapter] = []
    works: list[tuple[str, str]] = []
    for start in range(0, registry, chapters_per_work):
        title = work_title(len(works) + 1)
        group = [
            RegisteredChapter(title, n, f"第{n}章 {title}之{n}", tuple(body), origin)
            for n, (body, origin) in enumerate(bodies[start : start + chapters_per_work], 1)
        ]
        chapters.extend(group)
        works.append((title, work_file_text(title, group)))

    # --- chapter pages: what each one holds
    copies = pages // 2
    numbers = list(range(1, pages + 1))
    rng.shuffle(numbers)
    paths = [f"/book/{n}.html" for n in numbers]
    # kind, title, paragraphs, truth, enc
    specs: list[tuple[str, str, list[str], tuple[str, int] | None, str]] = []
    for i in range(copies):
        chapter = chapters[i % registry]
        kind = COPY_CYCLE[i % len(COPY_CYCLE)]
        paragraphs = list(chapter.paragraphs)
        encoding = "utf-8"
        if kind in _EDIT_RATES:
            paragraphs = paragraphs_of(random_edits("\n".join(paragraphs), _EDIT_RATES[kind], rng, pools.han))
        elif kind == "ads_spliced":
            paragraphs = splice_ads(paragraphs, rng)
        elif kind == "gbk":
            encoding = "gbk"
        specs.append((kind, chapter.heading, paragraphs, chapter.key, encoding))
    novels = iter(pools.unrelated_novel)
    news = iter(pools.unrelated_news)
    unrelated = ClauseStream(
        pools.unrelated_clauses,
        seed=seed + 1,
        first_epoch=1 if pools.unrelated_novel or pools.unrelated_news else 0,
    )
    for i in range(pages - copies):
        wanted = UNRELATED_KINDS[i % len(UNRELATED_KINDS)]
        document = next(novels, None) if wanted == "unregistered_novel" else None
        document = next(news, None) if wanted == "news" else document
        if document is None:
            specs.append(
                (
                    "synthetic_unrelated",
                    f"第{i + 1}章 无关之文{i + 1}",
                    unrelated.paragraphs(chapter_chars, rng),
                    None,
                    "utf-8",
                )
            )
        elif wanted == "news":
            specs.append(("news", f"新闻汇总{i + 1}：{document[1][0][:20]}", document[1], None, "utf-8"))
        else:
            specs.append(
                (
                    "unregistered_novel",
                    f"第{i + 1}章 水浒{document[0].split()[-1]}",
                    document[1],
                    None,
                    "utf-8",
                )
            )

    # --- the site: chapter pages in path order, index pages over them, the root
    order = sorted(range(pages), key=lambda i: numbers[i])
    served: dict[str, Page] = {}
    chapter_pages: list[SitePage] = []
    index_count = math.ceil(pages / links_per_index)
    for position, i in enumerate(order):
        kind, title, paragraphs, truth, encoding = specs[i]
        path = paths[i]
        prev = paths[order[position - 1]] if position else "/"
        next_ = paths[order[position + 1]] if position + 1 < pages else "/"
        index = f"/list/{position // links_per_index + 1}.html"
        body = render_chapter_page(title, paragraphs, prev=prev, next_=next_, index=index, encoding=encoding)
        served[path] = Page(body, content_type=f"text/html; charset={encoding}")
        chapter_pages.append(SitePage(path, kind, title, truth, encoding))
    index_paths = [f"/list/{k}.html" for k in range(1, index_count + 1)]
    for k, index_path in enumerate(index_paths):
        links = [(p.path, p.title) for p in chapter_pages[k * links_per_index : (k + 1) * links_per_index]]
        more = "".join(
            f'<a href="{href}">{label}</a> '
            for href, label in (
                (index_paths[k - 1] if k else None, "上一页"),
                (index_paths[k + 1] if k + 1 < index_count else None, "下一页"),
            )
            if href
        )
        served[index_path] = Page(render_index_page(f"最新章节 第{k + 1}页", links, extra=more))
    served["/"] = Page(
        render_index_page(SITE_NAME, [(p, f"最新章节 第{k}页") for k, p in enumerate(index_paths, 1)])
    )
    notes = {
        "text": pools.source,
        "registered_from_corpus": len(real),
        "registered_synthetic": registry - len(real),
        "registered_clause_epochs": stream.epochs_used,
        "unrelated_clause_epochs": unrelated.epochs_used,
        "max_copies_per_chapter": math.ceil(copies / registry) if copies else 0,
    }
    return PipelineSite(works, chapters, chapter_pages, served, index_paths, notes=notes)
