"""Capacity figures of the production pipeline on PostgreSQL: CPU per page per stage (ours and the database
server's), bytes in PostgreSQL per page, per fingerprint and per index row, and bytes on the broker per page.
``docs/capacity.md`` turns them into a plan for 100M and 1B pages.

    python -m benchmarks.pipeline.capacity --quick  # 40 pages, 20 registered chapters, 10-page stage sample
    python -m benchmarks.pipeline.capacity          # 2,000 pages, 1,000 chapters, 200-page stage sample
    python -m benchmarks.pipeline.capacity --pages 5000 --registry 2000 --redis redis://127.0.0.1:6379/7

What it does, in a PostgreSQL database of its own (created, then dropped at the end unless ``--keep``):

1. **The crawl, end to end**: the generated pirate site of ``benchmarks.pipeline.throughput``
   (``pipeline_site.build_site``: ~5,000-character chapter pages, half copies of registered chapters, in one
   site template) served on 127.0.0.1; ``fptrack works add`` per work, then ``fptrack crawl`` with one
   ``fptrack worker -c 1`` over Redis (a queue of this run's own). CPU seconds of each process: the crawl
   process (fetch, parse, extract, store, hand-off, settling the site; ``getrusage(RUSAGE_CHILDREN)`` around
   it), the worker (fingerprint, index, compare, record; ``/proc`` of its process tree, from "ready" to the
   crawl's end) and the PostgreSQL backends serving this database (``/proc/<pid>/stat`` of every backend
   ``pg_stat_activity`` lists for it, sampled every 0.2 s: a backend that lives less than that is missed, and
   the server's shared processes, WAL writer and checkpointer, are not counted).
2. **CPU per stage**, in this process on a sample of the stored pages, inside one transaction rolled back at
   the end: decode + main-text extraction (``crawler.parse``), ``fingerprint_text``, the index write
   (``write_fingerprints``: fingerprint rows and the binary ``COPY`` of the code index, batches of
   ``PAGES_PER_TASK``), compare (``compare_document``: candidates, verification) and settling the site
   (``settle_site``, divided by the site's pages). Each stage's client CPU (``time.process_time``) and the CPU
   of this session's own backend (``pg_backend_pid()``, from ``/proc``).
3. **Bytes in PostgreSQL** after ``VACUUM ANALYZE``: per table, rows, heap (with TOAST), indexes and total
   (``pg_table_size``, ``pg_indexes_size``, ``pg_total_relation_size``); per page, per fingerprint row and per
   code index row; rows per page and per registered chapter.
4. **Bytes on the broker per page**: the ``process_pages`` messages the crawl sends for these pages (the real
   task, ``delay`` with Celery's JSON serializer, ``PAGES_PER_TASK`` ids a message) pushed to a fresh queue no
   worker reads, then Redis ``MEMORY USAGE`` of the list and the sum of the message sizes; the queue is
   deleted. The result each task leaves in the result backend (an hour, ``result_expires``) is measured from
   the keys the crawl's worker wrote.

Prints a table per section and the load (``os.getloadavg``) at start and end, and ends with one JSON line.
Needs PostgreSQL on this machine (``/proc`` of its backends is read: run as root or as the ``postgres`` user),
Redis, and ``../shared/corpus`` (``FPTRACK_CORPUS``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from benchmarks.corpus import CORPUS, require_corpus
from benchmarks.harness import (
    BackendCpu,
    arguments,
    children_cpu_seconds,
    machine,
    print_table,
    process_cpu_seconds,
    progress,
    require_service,
    tree_cpu_seconds,
)
from benchmarks.pipeline.throughput import (
    CRAWL_LINE,
    Services,
    base_env,
    fptrack,
    pipeline_sessions,
    stage_extract,
    workers,
)
from benchmarks.pipeline_site import PipelineSite, build_site, corpus_pools
from testbed.sites import serve_site

TABLES = ("pages", "fingerprints", "code_index", "matches", "chapters", "works", "sites", "crawl_jobs")


def libpq_dsn(url: str) -> str:
    """A SQLAlchemy URL (``postgresql+psycopg://...``) as psycopg's own connection string."""
    from sqlalchemy.engine import make_url

    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


# ------------------------------------------------------------------------------------------------------- the
# crawl


def crawl_end_to_end(
    site: PipelineSite,
    base: str,
    database_url: str,
    workdir: Path,
    services: Services,
    args: argparse.Namespace,
) -> dict[str, Any]:
    """Register, then crawl with one worker: wall and CPU seconds of the crawl process, the worker,
    PostgreSQL."""
    data_dir = workdir / "crawl"
    data_dir.mkdir()
    env = base_env(data_dir, database_url, args.concurrency)
    fptrack(env, "init")
    progress(f"registering {len(site.chapters)} chapters in {len(site.works)} works")
    for title, text in site.works:
        path = workdir / f"{title}.txt"
        path.write_text(text, encoding="utf-8")
        fptrack(env, "works", "add", str(path), "--title", title)
    services.analyze(database_url)  # planner statistics of the registry, as autovacuum would make them

    queue = f"fptrack_capacity_{os.getpid()}"
    env.update(FPTRACK_BROKER_URL=args.redis, FPTRACK_TASK_QUEUE=queue)
    database = database_url.rsplit("/", 1)[1]
    crawl_args = (
        "crawl",
        base + "/",
        "--depth",
        str(site.depth),
        "--max-pages",
        str(len(site.pages) + 10),
        "-q",
    )
    progress(f"crawling {len(site.pages)} pages with one worker")
    try:
        with workers(env, 1, data_dir) as started, BackendCpu(database) as backends:
            worker_before = tree_cpu_seconds(started[0].pid)
            crawl_before = children_cpu_seconds()
            crawl, wall = fptrack(env, *crawl_args, timeout=600 + 20 * len(site.pages))
            crawl_cpu = children_cpu_seconds() - crawl_before
            worker_cpu = tree_cpu_seconds(started[0].pid) - worker_before
    finally:
        services.forget_queue(queue)
    summary = CRAWL_LINE.search(crawl.stdout)
    if summary is None:
        raise RuntimeError(f"no summary line in the crawl's output:\n{crawl.stdout[-2000:]}")
    return {
        "pages": int(summary.group(1)),
        "failed": int(summary.group(4)),
        "wall_s": round(wall, 2),
        "crawl_process_cpu_s": round(crawl_cpu, 2),
        "worker_cpu_s": round(worker_cpu, 2),
        "postgres_backends_cpu_s": round(backends.seconds, 2),
        "postgres_cpu_readable": backends.readable,
        "queue": queue,
    }


# -------------------------------------------------------------------------------------------------- stage CPU


def stage_cpu(
    site: PipelineSite, base: str, database_url: str, workdir: Path, sample: int, seed: int
) -> dict[str, Any]:
    """Client and server CPU ms per page of each stage on ``sample`` stored pages; nothing is kept
    (rollback)."""
    from sqlalchemy import select

    from fptrack.compare.service import compare_document, layout_for
    from fptrack.compare.templates import settle_site
    from fptrack.fingerprint.text_fingerprints import fingerprint_text
    from fptrack.jobs.tasks import PAGES_PER_TASK
    from fptrack.storage.fingerprints import FingerprintSet, write_fingerprints
    from fptrack.storage.models import Page

    settings, sessions = pipeline_sessions(database_url, workdir / "crawl")
    chosen = random.Random(seed).sample(site.chapter_pages, min(sample, len(site.chapter_pages)))
    urls = {base + spec.path: spec for spec in chosen}
    warm = site.pages[chosen[0].path]
    fingerprint_text(stage_extract(base + chosen[0].path, warm.body, warm.content_type or "text/html"))
    client: dict[str, float] = {}
    server: dict[str, float] = {}

    with sessions() as session:
        backend = int(session.connection().exec_driver_sql("SELECT pg_backend_pid()").scalar_one())

        def timed(stage: str, call: Any) -> Any:
            c0, s0 = time.process_time(), process_cpu_seconds(backend)
            value = call()
            client[stage] = client.get(stage, 0.0) + time.process_time() - c0
            server[stage] = server.get(stage, 0.0) + process_cpu_seconds(backend) - s0
            return value

        ids = {
            str(url): int(i)
            for url, i in session.execute(select(Page.url, Page.id).where(Page.url.in_(list(urls))))
        }
        site_id = session.execute(select(Page.site_id).where(Page.url.in_(list(urls))).limit(1)).scalar_one()
        site_pages = len(session.execute(select(Page.id).where(Page.site_id == site_id)).all())
        documents = []
        for url, spec in urls.items():
            served = site.pages[spec.path]
            # the lambdas run at once, inside timed(): the loop variables cannot change under them
            content_type = served.content_type or "text/html"
            text = timed("extract", lambda: stage_extract(url, served.body, content_type))  # noqa: B023
            documents.append((ids[url], timed("analyse", lambda: fingerprint_text(text))))  # noqa: B023
        layout = layout_for(settings)
        for start in range(0, len(documents), PAGES_PER_TASK):
            batch = [
                FingerprintSet(i, d.simhash, d.index_codes())
                for i, d in documents[start : start + PAGES_PER_TASK]
            ]
            write = lambda: write_fingerprints(session, owner="page", layout=layout, items=batch)  # noqa: B023
            timed("index write", write)
            timed("index write", session.flush)
        for _, document in documents:
            # the first pass fills the per-process chapter cache
            compare_document(session, document, settings)
        for _, document in documents:
            timed("compare", lambda: compare_document(session, document, settings))  # noqa: B023
        timed("settle (whole site)", lambda: settle_site(session, site_id, settings))
        session.rollback()

    pages = len(documents)
    rows = {
        stage: {
            "client_ms": round(client[stage] * 1000 / divisor, 2),
            "postgres_ms": round(server[stage] * 1000 / divisor, 2),
        }
        for stage, divisor in (
            ("extract", pages),
            ("analyse", pages),
            ("index write", pages),
            ("compare", pages),
            ("settle (whole site)", site_pages),
        )
    }
    return {"pages": pages, "site_pages": site_pages, "stages": rows}


# ---------------------------------------------------------------------------------------------------- storage


def table_sizes(dsn: str) -> dict[str, dict[str, int]]:
    """Rows and bytes (heap with TOAST, indexes, total) per table, after ``VACUUM ANALYZE``."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.execute("VACUUM ANALYZE")
        sizes = {}
        for table in TABLES:
            rows = connection.execute(f"SELECT count(*) FROM {table}").fetchone()
            size = connection.execute(
                "SELECT pg_table_size(%s), pg_indexes_size(%s), pg_total_relation_size(%s)",
                (table, table, table),
            ).fetchone()
            assert rows is not None and size is not None
            sizes[table] = {
                "rows": int(rows[0]),
                "table": int(size[0]),
                "indexes": int(size[1]),
                "total": int(size[2]),
            }
        owners = {}
        page_rows = (
            "SELECT count(*) FROM code_index c JOIN fingerprints f ON f.id = c.fingerprint_id "
            "WHERE f.page_id IS NOT NULL"
        )
        simhash_bytes = (
            "SELECT coalesce(sum(pg_relation_size(indexrelid)), 0) FROM pg_index i "
            "JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname LIKE 'ix_fingerprints_f%'"
        )
        for label, statement in (
            ("page_fingerprints", "SELECT count(*) FROM fingerprints WHERE page_id IS NOT NULL"),
            ("chapter_fingerprints", "SELECT count(*) FROM fingerprints WHERE chapter_id IS NOT NULL"),
            ("page_index_rows", page_rows),
            ("chapter_index_rows", page_rows.replace("f.page_id", "f.chapter_id")),
            ("simhash_index_bytes", simhash_bytes),
        ):  # fmt: skip
            row = connection.execute(statement).fetchone()
            owners[label] = int(row[0]) if row else 0
        for table in ("code_index", "fingerprints", "pages"):
            for index, size in connection.execute(
                "SELECT indexrelid::regclass::text, pg_relation_size(indexrelid) FROM pg_index "
                "WHERE indrelid = %s::regclass ORDER BY 2 DESC",
                (table,),
            ):
                owners[f"index {table} {index}"] = int(size)
    sizes["_owners"] = owners
    return sizes


def storage_figures(sizes: dict[str, dict[str, int]]) -> dict[str, float]:
    """Bytes per row of the big tables and the bytes one crawled page costs (its page row, fingerprints, index
    rows and matches), derived from :func:`table_sizes`."""
    owners = sizes["_owners"]

    def per_row(table: str, part: str) -> float:
        return sizes[table][part] / sizes[table]["rows"] if sizes[table]["rows"] else 0.0

    pages = sizes["pages"]["rows"]
    fingerprints_per_page = owners["page_fingerprints"] / pages
    index_rows_per_page = owners["page_index_rows"] / pages
    matches_per_page = sizes["matches"]["rows"] / pages
    figures = {
        "page_row_bytes": per_row("pages", "total"),
        "page_row_bytes_without_indexes": per_row("pages", "table"),
        "fingerprint_bytes": per_row("fingerprints", "total"),
        "fingerprint_bytes_without_indexes": per_row("fingerprints", "table"),
        "index_row_bytes": per_row("code_index", "total"),
        "index_row_bytes_without_indexes": per_row("code_index", "table"),
        "index_row_index_bytes": per_row("code_index", "indexes"),
        "match_bytes": per_row("matches", "total"),
        "fingerprints_per_page": fingerprints_per_page,
        "index_rows_per_page": index_rows_per_page,
        "index_rows_per_chapter": owners["chapter_index_rows"] / max(1, sizes["chapters"]["rows"]),
        "matches_per_page": matches_per_page,
        "simhash_index_bytes_per_fingerprint_row": owners["simhash_index_bytes"]
        / max(1, sizes["fingerprints"]["rows"]),
    }
    figures["bytes_per_page"] = (
        figures["page_row_bytes"]
        + fingerprints_per_page * figures["fingerprint_bytes"]
        + index_rows_per_page * figures["index_row_bytes"]
        + matches_per_page * figures["match_bytes"]
    )
    figures["index_bytes_per_page"] = (
        sizes["pages"]["indexes"] / pages
        + fingerprints_per_page * per_row("fingerprints", "indexes")
        + index_rows_per_page * figures["index_row_index_bytes"]
        + matches_per_page * per_row("matches", "indexes")
    )
    return {k: round(v, 2) for k, v in figures.items()}


# ----------------------------------------------------------------------------------------------------- broker


def queue_bytes(database_url: str, workdir: Path, redis_url: str, pages: int) -> dict[str, Any]:
    """Bytes on Redis of the ``process_pages`` messages for this run's stored pages (no worker reads the
    queue), and of the task results the crawl's worker left."""
    import redis
    from sqlalchemy import select

    from fptrack.core.settings import Settings
    from fptrack.jobs import tasks
    from fptrack.storage.models import Page

    queue = f"fptrack_capacity_bytes_{os.getpid()}"
    settings = Settings(
        data_dir=workdir / "crawl", database_url=database_url, broker_url=redis_url, task_queue=queue
    )
    _, sessions = pipeline_sessions(database_url, workdir / "crawl")
    with sessions() as session:
        ids = [int(i) for i in session.scalars(select(Page.id).order_by(Page.id))]
    client = redis.Redis.from_url(redis_url)
    tasks.configure(settings)
    try:
        for start in range(0, len(ids), tasks.PAGES_PER_TASK):
            tasks.process_pages.delay(ids[start : start + tasks.PAGES_PER_TASK])
        messages = client.lrange(queue, 0, -1)
        memory = int(client.memory_usage(queue) or 0)
    finally:
        client.delete(queue, f"_kombu.binding.{queue}", f"_kombu.binding_permanent.{queue}")
    results = [
        int(client.memory_usage(key) or 0) for key in client.scan_iter("celery-task-meta-*", count=1000)
    ]
    message_bytes = sum(len(m) for m in messages)
    return {
        "messages": len(messages),
        "pages": len(ids),
        "message_bytes_mean": round(message_bytes / max(1, len(messages)), 1),
        "message_bytes_per_page": round(message_bytes / max(1, len(ids)), 1),
        "redis_memory_bytes": memory,
        "redis_memory_bytes_per_page": round(memory / max(1, len(ids)), 1),
        "result_keys": len(results),
        "result_bytes_mean": round(statistics.fmean(results), 1) if results else None,
        "crawled_pages": pages,
    }


# ------------------------------------------------------------------------------------------------------- main


def main() -> None:
    parser = arguments(__doc__, "40 pages, 20 chapters, a 10-page stage sample")
    parser.add_argument("--pages", type=int, help="chapter pages on the site (default 2,000; quick 40)")
    parser.add_argument("--registry", type=int, help="registered chapters (default 1,000; quick 20)")
    parser.add_argument(
        "--stage-sample", type=int, help="pages of the per-stage sample (default 200; quick 10)"
    )
    parser.add_argument("--concurrency", type=int, default=8, help="FPTRACK_CRAWL_CONCURRENCY of the crawl")
    parser.add_argument(
        "--postgres",
        default=os.environ.get("FPTRACK_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"),
        help="PostgreSQL server on this machine where this run creates (and drops) its own database",
    )
    parser.add_argument(
        "--redis",
        default=os.environ.get("FPTRACK_BENCH_REDIS_URL", "redis://127.0.0.1:6379/14"),
        help="Redis broker (queues of this run's own)",
    )
    parser.add_argument("--seed", type=int, default=9)
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder and the database")
    args = parser.parse_args()
    pages = args.pages if args.pages is not None else (40 if args.quick else 2000)
    registry = args.registry if args.registry is not None else (20 if args.quick else 1000)
    sample = args.stage_sample if args.stage_sample is not None else (10 if args.quick else 200)
    if pages < 2 or registry < 1 or sample < 1:
        parser.error("need --pages >= 2, --registry >= 1 and --stage-sample >= 1")
    if urlsplit(args.postgres).hostname not in ("127.0.0.1", "localhost", "::1"):
        parser.error("--postgres must be a server on this machine: its backends' CPU is read from /proc")
    # no chapter copied more than 4 times (as in benchmarks.pipeline.throughput)
    registry = max(registry, -(-(pages // 2) // 4))

    require_service("capacity", "PostgreSQL", args.postgres, 5432)
    require_service("capacity", "Redis", args.redis, 6379)
    require_corpus("capacity")
    started = time.monotonic()
    load_start = os.getloadavg()
    services = Services(args.postgres, args.redis)
    services.probe()
    if services.postgres_problem or services.redis_problem:
        raise SystemExit(services.postgres_problem or services.redis_problem)
    progress(f"building the site from {CORPUS}: {pages} pages, {registry} registered chapters")
    site = build_site(corpus_pools(CORPUS), pages=pages, registry=registry, seed=args.seed)
    workdir = Path(tempfile.mkdtemp(prefix="fptrack-capacity-"))
    try:
        database_url = services.fresh_database("capacity")
        with serve_site(site.pages) as base:
            crawl = crawl_end_to_end(site, base, database_url, workdir, services, args)
            progress(f"CPU per stage on {sample} pages")
            stages = stage_cpu(site, base, database_url, workdir, sample, args.seed)
        progress("VACUUM ANALYZE and table sizes")
        sizes = table_sizes(libpq_dsn(database_url))
        storage = storage_figures(sizes)
        progress("broker bytes per page")
        broker = queue_bytes(database_url, workdir, args.redis, crawl["pages"])
    finally:
        if args.keep:
            print(f"kept {workdir} and databases {', '.join(services.created)}", file=sys.stderr)
        else:
            try:
                services.drop_created()
            finally:
                shutil.rmtree(workdir, ignore_errors=True)
    load_end = os.getloadavg()
    info = machine()

    print("capacity: the production pipeline on PostgreSQL, per page (benchmarks/pipeline/capacity.py)")
    print(f"machine: {info.get('cpu', '?')}, {info['cores']} cores, {info.get('ram_gb', '?')} GB RAM, "
          f"PostgreSQL {services.postgres_version} (autovacuum {services.postgres_autovacuum}); load average "
          f"{load_start[0]:.2f} at start, {load_end[0]:.2f} at end")  # fmt: skip
    n = crawl["pages"]
    print_table(
        f"End to end: `fptrack crawl` of {n:,} pages ({crawl['failed']} failed) with 1 worker, registry "
        f"{len(site.chapters):,} chapters; {crawl['wall_s']:.1f} s wall, {n / crawl['wall_s']:.1f} pages/s",
        ["process", "CPU s", "CPU ms per page"],
        [
            [
                "crawl (fetch, parse, extract, store, hand-off, settle)",
                crawl["crawl_process_cpu_s"],
                round(crawl["crawl_process_cpu_s"] * 1000 / n, 2),
            ],
            [
                "worker (fingerprint, index, compare, record)",
                crawl["worker_cpu_s"],
                round(crawl["worker_cpu_s"] * 1000 / n, 2),
            ],
            [
                "PostgreSQL backends of this database",
                crawl["postgres_backends_cpu_s"],
                round(crawl["postgres_backends_cpu_s"] * 1000 / n, 2),
            ],
            [
                "total",
                round(
                    crawl["crawl_process_cpu_s"] + crawl["worker_cpu_s"] + crawl["postgres_backends_cpu_s"], 2
                ),
                round(
                    (crawl["crawl_process_cpu_s"] + crawl["worker_cpu_s"] + crawl["postgres_backends_cpu_s"])
                    * 1000
                    / n,
                    2,
                ),
            ],
        ],
    )
    if not crawl["postgres_cpu_readable"]:
        print("note: /proc of the PostgreSQL backends was not readable (run as root or as postgres): "
              "the PostgreSQL CPU figures are missing, not zero")  # fmt: skip
    print_table(
        f"CPU ms per page per stage (in-process, {stages['pages']} pages; settle: the whole site divided by "
        f"its {stages['site_pages']:,} pages)",
        ["stage", "client ms", "PostgreSQL ms"],
        [[stage, row["client_ms"], row["postgres_ms"]] for stage, row in stages["stages"].items()],
    )
    print_table(
        "PostgreSQL after VACUUM ANALYZE",
        ["table", "rows", "table MB", "indexes MB", "total MB", "bytes/row", "bytes/row no index"],
        [
            [
                t,
                f"{s['rows']:,}",
                round(s["table"] / 1e6, 2),
                round(s["indexes"] / 1e6, 2),
                round(s["total"] / 1e6, 2),
                round(s["total"] / s["rows"]) if s["rows"] else "",
                round(s["table"] / s["rows"]) if s["rows"] else "",
            ]
            for t, s in sizes.items()
            if not t.startswith("_")
        ],
    )
    print_table(
        "Indexes of the big tables",
        ["table", "index", "MB", "bytes per row"],
        [
            [table, index, round(size / 1e6, 2), round(size / max(1, sizes[table]["rows"]), 1)]
            for (table, index), size in (
                (tuple(name.split()[1:3]), size)
                for name, size in sizes["_owners"].items()
                if name.startswith("index ")
            )
        ],
    )
    print_table(
        "Per crawled page",
        ["figure", "value"],
        [[k.replace("_", " "), v] for k, v in storage.items()],
    )
    print_table(
        f"Broker (Redis) per page: {broker['messages']} process_pages messages for {broker['pages']:,} pages",
        ["figure", "value"],
        [[k.replace("_", " "), v] for k, v in broker.items() if k not in ("crawled_pages",)],
    )
    print(
        json.dumps(
            {
                "benchmark": "capacity",
                "quick": args.quick,
                "machine": info,
                "postgresql": services.postgres_version,
                "load_average": {"start": load_start[0], "end": load_end[0]},
                "site_pages": n,
                "registry_chapters": len(site.chapters),
                "crawl": crawl,
                "stages_cpu_ms": stages,
                "tables": sizes,
                "per_page": storage,
                "broker": broker,
                "seconds": round(time.monotonic() - started, 1),
            },
            ensure_ascii=False,
        )
    )


if __name__ == "__main__":
    main()
