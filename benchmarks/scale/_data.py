"""The text of ``benchmarks.scale.pages``: a registry of synthesised works made lazily, a plan that says what
every stored page holds as a pure function of its number, the planted copies of the works registered later,
and the fresh site crawled on top at each size.

Everything here is deterministic from ``(seed, page number)`` so that two fill processes can make their own
slices of pages without talking to each other, and so that filling from 10,000 to 100,000 pages later adds
exactly the pages a direct fill to 100,000 would have.

- **Registry**: works of ``CHAPTERS_PER_WORK`` chapters; work ``w`` is synthesised from the registered
  clauses (西游记, 三国演义) by a :class:`ClauseStream` of its own that starts at epoch ``w + 1``: every
  work has its own shuffle and its own character substitution, so works never repeat one another verbatim,
  and a work can be made again from its number alone (a 100,000-chapter registry is never held in memory).
- **Stored pages** (``page_spec``): in blocks of 20 pages, the even offsets are unrelated text (clauses of
  水浒传 and the news, a stream per fill process) and the odd ones copies of registered chapters: verbatim,
  edited at 5 % and 10 % of the Han characters, ads spliced in, and one chapter mirrored verbatim on three
  hosts. Hosts hold 20,000 pages each (50 sites make a million pages).
- **Planted copies** (``planted_copies``): one new 1M-character work per measured size, registered only when
  that size is reached; its chapters are copied onto pages spread over the pages below that size, by kind:
  verbatim, edited, mirror (the same text on three hosts) and excerpt (a passage of 300 or 1,000 characters
  inside unrelated text). What the new work finds among them is the retroactive recall.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache

from benchmarks.pipeline_site import (
    ClauseStream,
    RegisteredChapter,
    TextPools,
    render_chapter_page,
    render_index_page,
    work_file_text,
)
from benchmarks.pirate_web import paragraphs_of, random_edits, splice_ads
from testbed.sites import Page

CHAPTERS_PER_WORK = 200
CHAPTER_CHARS = 5600  # with the heading and the site's promotion line a stored page holds about 6,000
HOST_PAGES = 20_000
BLOCK = 20
# the copy slots of a block (odd offsets 1, 3, ..., 19), in order; "mirror" three times: one text, three hosts
COPY_SLOTS = (
    "verbatim",
    "edit_05",
    "verbatim",
    "edit_10",
    "mirror",
    "mirror",
    "mirror",
    "ads_spliced",
    "edit_05",
    "verbatim",
)
GROUPS_PER_BLOCK = 8  # copy slots of a block that copy distinct chapters (the three mirrors share one)
EDIT_RATES = {"edit_05": 0.05, "edit_10": 0.10}
PLANTED_KINDS = ("verbatim", "edited", "mirror", "excerpt")
MIRRORS = 3
NEW_WORK_BASE = 1_000_000  # work numbers of the planted works: far past any registry's


def _group_of_slot(slot: int) -> int:
    """Index of a copy slot's chapter group within its block (the three mirror slots share group 4)."""
    return slot if slot <= 4 else max(4, slot - 2)


@dataclass(frozen=True)
class PageSpec:
    """What stored page ``number`` holds. ``truth``: (work number, chapter index from 1) it copies, if any."""

    number: int
    url: str
    host: str
    kind: str
    truth: tuple[int, int] | None
    planted: bool = False


def work_name(number: int) -> str:
    return f"规模作品{number:07d}"


class Registry:
    """``chapters`` registered chapters in works of :data:`CHAPTERS_PER_WORK`, synthesised on demand."""

    def __init__(self, pools: TextPools, chapters: int, *, seed: int) -> None:
        if chapters < 1:
            raise ValueError("a registry needs at least one chapter")
        self.pools = pools
        self.chapters = chapters
        self.seed = seed
        self._work = lru_cache(maxsize=4)(self._make_work)

    @property
    def works(self) -> int:
        return -(-self.chapters // CHAPTERS_PER_WORK)

    def chapters_of(self, work: int) -> int:
        return min(CHAPTERS_PER_WORK, self.chapters - work * CHAPTERS_PER_WORK)

    def _make_work(self, work: int, chapters: int) -> tuple[RegisteredChapter, ...]:
        stream = ClauseStream(self.pools.registered_clauses, seed=self.seed, first_epoch=work + 1)
        rng = random.Random(f"{self.seed}:work:{work}")
        title = work_name(work)
        return tuple(
            RegisteredChapter(
                title, n, f"第{n}章 {title}之{n}", tuple(stream.paragraphs(CHAPTER_CHARS, rng)), "synthetic"
            )
            for n in range(1, chapters + 1)
        )

    def work(self, work: int) -> tuple[RegisteredChapter, ...]:
        """The chapters of registered work ``work`` (0-based) or, past the registry, of a planted new work."""
        if work < self.works:
            return self._work(work, self.chapters_of(work))
        return self._work(work, CHAPTERS_PER_WORK)

    def chapter(self, index: int) -> RegisteredChapter:
        """Registered chapter ``index`` (0-based over the whole registry)."""
        return self.work(index // CHAPTERS_PER_WORK)[index % CHAPTERS_PER_WORK]

    def work_file(self, work: int) -> tuple[str, str]:
        """(title, text file) of a work, as ``fptrack works add`` reads it."""
        title = work_name(work)
        return title, work_file_text(title, self.work(work))


def host_of(number: int, mirror: int = 0) -> str:
    site = f"pirate{number // HOST_PAGES:03d}.example"
    return f"www.{site}" if mirror == 0 else f"m{mirror}.{site}"


def page_spec(number: int, registry_chapters: int) -> PageSpec:
    """What stored page ``number`` holds (before planting; see :func:`planted_copies`)."""
    block, offset = divmod(number, BLOCK)
    if offset % 2 == 0:
        host = host_of(number)
        return PageSpec(number, f"http://{host}/book/{number}.html", host, "unrelated", None)
    slot = offset // 2
    kind = COPY_SLOTS[slot]
    chapter = (block * GROUPS_PER_BLOCK + _group_of_slot(slot)) % registry_chapters
    mirror = slot - 4 if kind == "mirror" else 0
    host = host_of(number, mirror)
    truth = (chapter // CHAPTERS_PER_WORK, chapter % CHAPTERS_PER_WORK + 1)
    return PageSpec(number, f"http://{host}/book/{number}.html", host, kind, truth)


@dataclass(frozen=True)
class Planted:
    """A planted copy: page ``number`` holds chapter ``chapter`` (from 1) of new work ``work``."""

    number: int
    work: int
    chapter: int
    kind: str
    excerpt_chars: int = 0
    mirror: int = 0

    @property
    def host(self) -> str:
        return host_of(self.number, self.mirror)

    @property
    def url(self) -> str:
        return f"http://{self.host}/planted/{self.work}/{self.number}.html"


def planted_copies(sizes: Sequence[int], *, seed: int) -> dict[int, Planted]:
    """Page number -> planted copy, for one new work per size (work ``NEW_WORK_BASE + i`` for ``sizes[i]``),
    its pages drawn at random below that size. Per work of 200 chapters: 40 verbatim, 40 edited, 40 mirrored
    on three hosts (120 pages), 80 excerpts."""
    rng = random.Random(f"{seed}:planted")
    out: dict[int, Planted] = {}
    for i, size in enumerate(sorted(sizes)):
        work = NEW_WORK_BASE + i
        wanted = CHAPTERS_PER_WORK + (MIRRORS - 1) * (CHAPTERS_PER_WORK // 5)
        if wanted > size // 2:
            raise ValueError(f"size {size} is too small for the {wanted} planted pages of a new work")
        free = (n for n in iter(lambda: rng.randrange(size), None) if n not in out)  # noqa: B023 - used at once
        for chapter in range(1, CHAPTERS_PER_WORK + 1):
            kind = PLANTED_KINDS[min((chapter - 1) % 5, 3)]
            if kind == "mirror":
                for mirror in range(MIRRORS):
                    number = next(free)
                    out[number] = Planted(number, work, chapter, kind, mirror=mirror + 1)
            else:
                number = next(free)
                excerpt = (300 if chapter % 2 else 1000) if kind == "excerpt" else 0
                out[number] = Planted(number, work, chapter, kind, excerpt_chars=excerpt)
    return out


def new_work_of_size(sizes: Sequence[int], size: int) -> int:
    """The work number planted for ``size`` (see :func:`planted_copies`)."""
    return NEW_WORK_BASE + sorted(sizes).index(size)


def promo(host: str) -> str:
    return f"天才一秒记住本站地址：{host}。手机版阅读网址：m.{host}"


class PageTexts:
    """Makes the stored text of pages; one per fill process (``stream``: its own unrelated clauses)."""

    def __init__(self, registry: Registry, planted: dict[int, Planted], *, seed: int, stream: int) -> None:
        self.registry = registry
        self.planted = planted
        self.seed = seed
        pools = registry.pools
        self.unrelated = ClauseStream(pools.unrelated_clauses, seed=seed * 1_000_003 + stream, first_epoch=1)
        self._rng = random.Random(f"{seed}:{stream}:rng")

    def _unrelated_paragraphs(self, chars: int) -> list[str]:
        return self.unrelated.paragraphs(chars, self._rng)

    def _copy(self, chapter: RegisteredChapter, kind: str, number: int) -> list[str]:
        paragraphs = list(chapter.paragraphs)
        if kind in EDIT_RATES:
            rng = random.Random(f"{self.seed}:edit:{number}")
            return paragraphs_of(
                random_edits("\n".join(paragraphs), EDIT_RATES[kind], rng, self.registry.pools.han)
            )
        if kind == "ads_spliced":
            return splice_ads(paragraphs, random.Random(f"{self.seed}:ads:{number}"))
        return paragraphs

    def page(self, number: int) -> tuple[PageSpec, str, str]:
        """(spec, title, text) of stored page ``number``."""
        planted = self.planted.get(number)
        if planted is not None:
            spec = PageSpec(
                number, planted.url, planted.host, planted.kind, (planted.work, planted.chapter), planted=True
            )
            chapter = self.registry.work(planted.work)[planted.chapter - 1]
            if planted.kind == "excerpt":
                body = "".join(chapter.paragraphs)
                start = random.Random(f"{self.seed}:excerpt:{number}").randrange(
                    max(1, len(body) - planted.excerpt_chars)
                )
                before = self._unrelated_paragraphs(2500)
                after = self._unrelated_paragraphs(2500)
                paragraphs = [*before, body[start : start + planted.excerpt_chars], *after]
                title = f"第{number}章 杂谈{number}"
            else:
                kind = "edit_05" if planted.kind == "edited" else "verbatim"
                paragraphs, title = self._copy(chapter, kind, number), chapter.heading
            return spec, title, "\n".join([title, promo(spec.host), *paragraphs])
        spec = page_spec(number, self.registry.chapters)
        if spec.truth is None:
            title = f"第{number}章 无关之文{number}"
            paragraphs = self._unrelated_paragraphs(CHAPTER_CHARS)
        else:
            chapter = self.registry.work(spec.truth[0])[spec.truth[1] - 1]
            # mirrors are verbatim: one text on three hosts
            paragraphs, title = self._copy(chapter, spec.kind, number), chapter.heading
        return spec, title, "\n".join([title, promo(spec.host), *paragraphs])


def fresh_site(
    registry: Registry, pools: TextPools, *, pages: int, seed: int, links_per_index: int = 100
) -> tuple[dict[str, Page], int]:
    """A site of ``pages`` chapter pages for the timed crawl (half copies of registered chapters, verbatim or
    edited, half unrelated text), in the template of ``pipeline_site``: ``/`` -> index pages -> chapter
    pages (``--depth 2``). Returns (served pages, copies on it). ``seed`` makes each size's site new."""
    rng = random.Random(f"{seed}:fresh")
    unrelated = ClauseStream(pools.unrelated_clauses, seed=seed * 7_919 + 1, first_epoch=1)
    copies = pages // 2
    # the chapters of a few works drawn at random (a work is made again from its number: few works, little
    # time), each copied once while they last
    works = rng.sample(range(registry.works), min(registry.works, -(-copies // CHAPTERS_PER_WORK)))
    chosen = [w * CHAPTERS_PER_WORK + c for w in sorted(works) for c in range(registry.chapters_of(w))]
    chosen = (chosen * (copies // max(1, len(chosen)) + 1))[:copies]
    specs: list[tuple[str, list[str]]] = []
    for i, index in enumerate(chosen):
        chapter = registry.chapter(index)
        paragraphs = list(chapter.paragraphs)
        rate = (0.0, 0.05, 0.10)[i % 3]
        if rate:
            paragraphs = paragraphs_of(random_edits("\n".join(paragraphs), rate, rng, pools.han))
        specs.append((chapter.heading, paragraphs))
    for i in range(pages - copies):
        specs.append((f"第{i + 1}章 闲话{seed}之{i + 1}", unrelated.paragraphs(CHAPTER_CHARS, rng)))
    rng.shuffle(specs)
    paths = [f"/book/{n}.html" for n in range(1, pages + 1)]
    served: dict[str, Page] = {}
    index_paths = [f"/list/{k}.html" for k in range(1, -(-pages // links_per_index) + 1)]
    for position, (title, paragraphs) in enumerate(specs):
        prev = paths[position - 1] if position else "/"
        next_ = paths[position + 1] if position + 1 < pages else "/"
        listing = index_paths[position // links_per_index]
        served[paths[position]] = Page(
            render_chapter_page(title, paragraphs, prev=prev, next_=next_, index=listing)
        )
    for k, index_path in enumerate(index_paths):
        links = [
            (paths[j], specs[j][0]) for j in range(k * links_per_index, min(pages, (k + 1) * links_per_index))
        ]
        served[index_path] = Page(render_index_page(f"最新章节 第{k + 1}页", links))
    served["/"] = Page(
        render_index_page("规模测试站", [(p, f"第{k}页") for k, p in enumerate(index_paths, 1)])
    )
    return served, copies


def numbers_between(start: int, stop: int, part: int, parts: int) -> Iterator[int]:
    """The page numbers of ``[start, stop)`` that fill process ``part`` of ``parts`` makes: contiguous
    slices, so that each process walks the registry's works in order (few works made again)."""
    span = stop - start
    lo = start + span * part // parts
    hi = start + span * (part + 1) // parts
    return iter(range(lo, hi))
