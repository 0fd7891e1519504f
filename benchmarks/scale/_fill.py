"""The bulk side of ``benchmarks.scale.pages``: registering the registry and filling the database with stored
pages through the product's own functions, in worker processes, and the measurements taken in-process.

Only stable entry points of the product are used, so that the benchmark keeps measuring while the storage
under them changes: :class:`fptrack.crawler.store.PageStore` (what the crawl writes through),
:func:`fptrack.compare.service.process_pages` (what the workers run on each batch),
``register_work`` + :func:`fptrack.compare.service.index_work` (what ``fptrack works add`` runs) and
:func:`fptrack.fingerprint.text_fingerprints.fingerprint_text`. The tables are read only in bulk
(``pg_total_relation_size`` over every table there is), never by name, except ``pages`` for its row count.
"""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.pipeline_site import TextPools, corpus_pools, generated_pools
from benchmarks.scale._data import CHAPTERS_PER_WORK, PageTexts, Registry, numbers_between, planted_copies

FILL_BATCH = 32  # pages per store transaction and per process_pages call (the crawl's batch and task size)


@dataclass(frozen=True)
class Plan:
    """What every process needs to make the same pages: passed to spawned processes, so plain values."""

    database_url: str
    data_dir: str
    registry_chapters: int
    sizes: tuple[int, ...]
    seed: int
    corpus: str  # "" for generated text (tests)
    nice: int = 0

    def pools(self) -> TextPools:
        return corpus_pools(Path(self.corpus)) if self.corpus else generated_pools(seed=self.seed)


@dataclass
class FillTimes:
    """What one fill process spent: wall and CPU seconds storing and processing, pages made."""

    pages: int = 0
    generate_s: float = 0.0
    store_s: float = 0.0
    process_wall_s: float = 0.0
    process_cpu_s: float = 0.0
    errors: list[str] = field(default_factory=list)

    def add(self, other: FillTimes) -> None:
        self.pages += other.pages
        self.generate_s += other.generate_s
        self.store_s += other.store_s
        self.process_wall_s += other.process_wall_s
        self.process_cpu_s += other.process_cpu_s
        self.errors.extend(other.errors)


# ---------------------------------------------------------------------------------------------- PRODUCT API
# Every in-process call of the product is in this section.


def sessions_for(plan: Plan) -> tuple[Any, Any]:
    """(settings, sessionmaker) of the plan's database (the schema exists: ``fptrack init`` ran)."""
    from fptrack.core.settings import Settings
    from fptrack.storage.db import create_engine_for, session_factory

    settings = Settings(data_dir=Path(plan.data_dir), database_url=plan.database_url)
    return settings, session_factory(create_engine_for(settings))


def crawled_page(url: str, title: str, text: str) -> Any:
    """A page as the crawl hands it to the store (its HTML is not kept: the snapshot hash stands in)."""
    from fptrack.crawler.pages import CrawledPage

    data = text.encode("utf-8")
    return CrawledPage(
        url=url,
        final_url=url,
        status=200,
        encoding="utf-8",
        title=title,
        text=text,
        content_sha256=hashlib.sha256(data).hexdigest(),
        snapshot_sha256=hashlib.sha256(b"<html>" + data).hexdigest(),
        fetched_at=datetime.now(UTC),
    )


def page_store(sessions: Any, settings: Any, dispatched: list[int]) -> Any:
    """A crawl's page store whose hand-off collects the ids to process (in this process, no broker)."""
    from fptrack.crawler.store import PageStore

    return PageStore(
        sessions, job_id=None, dispatch=dispatched.extend, batch_size=FILL_BATCH, settings=settings
    )


def process(sessions: Any, settings: Any, page_ids: list[int]) -> None:
    """One worker task: fingerprint, index, compare and record a batch of stored pages, committed."""
    from fptrack.compare.service import process_pages

    with sessions() as session:
        process_pages(session, page_ids, settings)
        session.commit()


def register(sessions: Any, settings: Any, title: str, text: str) -> None:
    """Register a work and index its chapters (what ``fptrack works add`` does, before the retroactive
    re-compare, which finds nothing while no page is stored)."""
    from fptrack.compare.service import index_work
    from fptrack.compare.works import register_work

    with sessions() as session:
        registered = register_work(session, text.encode("utf-8"), source_name=f"{title}.txt", title=title)
        index_work(session, registered.work_id, settings)
        session.commit()


def analyse(text: str) -> Any:
    from fptrack.fingerprint.text_fingerprints import fingerprint_text

    return fingerprint_text(text)


# ------------------------------------------------------------------------------------------------ processes


def _register_part(plan: Plan, works: list[int], counter: Any) -> None:
    if plan.nice:
        os.nice(plan.nice)
    settings, sessions = sessions_for(plan)
    registry = Registry(plan.pools(), plan.registry_chapters, seed=plan.seed)
    for work in works:
        title, text = registry.work_file(work)
        register(sessions, settings, title, text)
        with counter.get_lock():
            counter.value += registry.chapters_of(work)


def _fill_part(plan: Plan, numbers: list[int], stream: int, counter: Any, results: Any) -> None:
    times = FillTimes()
    try:
        if plan.nice:
            os.nice(plan.nice)
        settings, sessions = sessions_for(plan)
        registry = Registry(plan.pools(), plan.registry_chapters, seed=plan.seed)
        texts = PageTexts(registry, planted_copies(plan.sizes, seed=plan.seed), seed=plan.seed, stream=stream)
        dispatched: list[int] = []
        store = page_store(sessions, settings, dispatched)
        for first in range(0, len(numbers), FILL_BATCH):
            t0 = time.perf_counter()
            pages = []
            for number in numbers[first : first + FILL_BATCH]:
                spec, title, text = texts.page(number)
                pages.append(crawled_page(spec.url, title, text))
            t1 = time.perf_counter()
            for page in pages:
                store.add(page)
            store.flush()
            t2 = time.perf_counter()
            c2 = time.process_time()
            ids, dispatched[:] = list(dispatched), []
            if ids:
                process(sessions, settings, ids)
            times.process_cpu_s += time.process_time() - c2
            times.process_wall_s += time.perf_counter() - t2
            times.generate_s += t1 - t0
            times.store_s += t2 - t1
            times.pages += len(pages)
            with counter.get_lock():
                counter.value += len(pages)
    except Exception as error:  # noqa: BLE001 - reported by the parent, which stops the run
        times.errors.append(f"{type(error).__name__}: {error}")
    results.put(times)


def _watch(processes: list[Any], counter: Any, total: int, what: str, progress: Any) -> None:
    """Wait for ``processes``, saying every 10 s how far ``counter`` got (rate and time left)."""
    started = time.monotonic()
    last = 0.0
    while any(p.is_alive() for p in processes):
        time.sleep(0.5)
        now = time.monotonic()
        if now - last >= 10:
            last = now
            done = counter.value
            rate = done / (now - started) if now > started else 0.0
            eta = (total - done) / rate if rate else float("inf")
            progress(f"{what}: {done:,}/{total:,} ({rate:.1f}/s, about {eta / 60:.1f} min left)")
    for p in processes:
        p.join()


def register_registry(plan: Plan, parts: int, progress: Any) -> float:
    """Register the plan's registry in ``parts`` processes; wall seconds."""
    context = multiprocessing.get_context("spawn")
    counter = context.Value("q", 0)
    count = -(-plan.registry_chapters // CHAPTERS_PER_WORK)
    started = time.perf_counter()
    processes = [
        context.Process(target=_register_part, args=(plan, list(range(part, count, parts)), counter))
        for part in range(min(parts, count))
    ]
    for p in processes:
        p.start()
    _watch(processes, counter, plan.registry_chapters, "registering chapters", progress)
    failed = [p.exitcode for p in processes if p.exitcode]
    if failed:
        raise RuntimeError(f"registering failed in {len(failed)} process(es) (exit codes {failed})")
    return time.perf_counter() - started


def fill(
    plan: Plan, start: int, stop: int, parts: int, progress: Any, *, only: list[int] | None = None
) -> tuple[FillTimes, float]:
    """Store and process pages ``[start, stop)`` (or just the numbers ``only`` of them) in ``parts``
    processes; (their summed times, wall s)."""
    if only is None:
        slices = [list(numbers_between(start, stop, part, parts)) for part in range(parts)]
    else:
        chosen = sorted(n for n in only if start <= n < stop)
        slices = [chosen[part::parts] for part in range(parts)]
    total_pages = sum(len(s) for s in slices)
    context = multiprocessing.get_context("spawn")
    counter = context.Value("q", 0)
    results = context.Queue()
    started = time.perf_counter()
    processes = [
        context.Process(target=_fill_part, args=(plan, numbers, start + part, counter, results))
        for part, numbers in enumerate(slices)
    ]
    for p in processes:
        p.start()
    what = f"filling pages {start:,}-{stop:,}" if only is None else f"filling {total_pages:,} planted pages"
    _watch(processes, counter, total_pages, what, progress)
    total = FillTimes()
    for _ in processes:
        total.add(results.get(timeout=60))
    if total.errors:
        raise RuntimeError(f"the fill failed: {'; '.join(total.errors)}")
    return total, time.perf_counter() - started


def _settle_part(plan: Plan, site_ids: list[int]) -> None:
    from fptrack.jobs.settling import settle_sites

    settings, sessions = sessions_for(plan)
    for site_id in site_ids:
        with sessions() as session:
            settle_sites(session, [site_id], settings)
            session.commit()


def settle_filled(plan: Plan, parts: int, progress: Any) -> tuple[int, float]:
    """Settle every site with pages compared since it last settled, as each crawl does at its end (its
    template decided and kept, the pages it touches compared again): (sites, wall s), in ``parts``
    processes over the sites."""
    from fptrack.jobs.settling import unsettled_sites

    _, sessions = sessions_for(plan)
    with sessions() as session:
        site_ids = unsettled_sites(session)
    progress(f"settling {len(site_ids)} site(s) as their crawls would")
    started = time.perf_counter()
    context = multiprocessing.get_context("spawn")
    processes = [
        context.Process(target=_settle_part, args=(plan, site_ids[part::parts])) for part in range(parts)
    ]
    for p in processes:
        p.start()
    for p in processes:
        p.join()
    failed = [p.exitcode for p in processes if p.exitcode != 0]
    if failed:
        raise RuntimeError(f"settling failed in {len(failed)} process(es) (exit codes {failed})")
    return len(site_ids), time.perf_counter() - started


# -------------------------------------------------------------------------------------------- measurements


PROBE_BASE = 2_000_000_000  # page numbers of the compare probe: far past any fill


def compare_probe(plan: Plan, size_index: int, *, batches: int = 3) -> dict[str, float]:
    """Per-page cost of the worker's task on fresh pages at this size: ``batches`` batches of
    :data:`FILL_BATCH` new pages (half copies, half unrelated) stored, then ``process_pages`` on each; the
    first batch is untimed (it loads what a long-running worker holds: caches, the chapter side). Wall and
    CPU ms per page of ``process_pages``, and its CPU less ``fingerprint_text`` of the same pages (the
    compare, index and record part)."""
    settings, sessions = sessions_for(plan)
    registry = Registry(plan.pools(), plan.registry_chapters, seed=plan.seed)
    texts = PageTexts(registry, {}, seed=plan.seed, stream=PROBE_BASE + size_index)
    wall = cpu = analyse_cpu = 0.0
    timed = 0
    for batch in range(batches):
        dispatched: list[int] = []
        store = page_store(sessions, settings, dispatched)
        first = PROBE_BASE + size_index * 10_000 + batch * FILL_BATCH
        made = [texts.page(n) for n in range(first, first + FILL_BATCH)]
        for spec, title, text in made:
            store.add(crawled_page(spec.url.replace("/book/", f"/probe{size_index}/"), title, text))
        store.flush()
        t0, c0 = time.perf_counter(), time.process_time()
        process(sessions, settings, list(dispatched))
        t1, c1 = time.perf_counter(), time.process_time()
        for _, _, text in made:
            analyse(text)
        c2 = time.process_time()
        if batch:
            wall += t1 - t0
            cpu += c1 - c0
            analyse_cpu += c2 - c1
            timed += len(dispatched)
    timed = max(1, timed)
    return {
        "pages": timed,
        "process_pages_wall_ms": round(wall * 1000 / timed, 2),
        "process_pages_cpu_ms": round(cpu * 1000 / timed, 2),
        "fingerprint_cpu_ms": round(analyse_cpu * 1000 / timed, 2),
        "compare_cpu_ms": round((cpu - analyse_cpu) * 1000 / timed, 2),
    }


def database_bytes(dsn: str) -> dict[str, Any]:
    """``VACUUM ANALYZE``, then ``pg_total_relation_size`` (heap, TOAST, indexes) of every table of the
    database, whatever tables the schema has now; and the rows of ``pages``."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.execute("VACUUM ANALYZE")
        rows = connection.execute(
            "SELECT c.relname, pg_total_relation_size(c.oid), pg_table_size(c.oid), pg_indexes_size(c.oid) "
            "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE c.relkind IN ('r', 'm') AND n.nspname NOT IN ('pg_catalog', 'information_schema') "
            "AND n.nspname NOT LIKE 'pg_toast%' ORDER BY 2 DESC"
        ).fetchall()
        pages_row = connection.execute("SELECT count(*) FROM pages").fetchone()
    tables = {str(name): {"total": int(t), "table": int(h), "indexes": int(i)} for name, t, h, i in rows}
    return {"pages": int(pages_row[0]) if pages_row else 0, "total": sum(t["total"] for t in tables.values()),
            "tables": tables}  # fmt: skip
