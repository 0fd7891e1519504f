"""fptrack at a real user's scale: a PostgreSQL database filled through the product's bulk path to 10,000,
100,000 and 1,000,000 stored pirate pages, with a registry of 1,000 and of 100,000 chapters, and at each size:
the crawl throughput of a fresh site on top, the per-page compare, PostgreSQL bytes per page, the time a newly
registered 1M-character work takes to find its copies among the stored pages, and their recall.

    python -m benchmarks.scale.pages --quick                      # 600 pages, 200 chapters, a 40-page crawl
    python -m benchmarks.scale.pages --sizes 10000 --registry 1000  # some minutes
    python -m benchmarks.scale.pages --sizes 10000,100000 --registry 1000
    python -m benchmarks.scale.pages                              # 10k, 100k, 1M x 1,000 and 100,000: hours

Per registry size, in a PostgreSQL database of this run's own (dropped at the end unless ``--keep``):

1. ``fptrack init``; the registry (``benchmarks/scale/_data.py``: works of 200 chapters of about 5,600
   characters synthesised from the corpus clauses, every work its own) registered in ``--fill-processes``
   processes with the product's ``register_work`` + ``index_work``; ``ANALYZE``.
2. **Fill** to each size in ``--sizes``: pages of about 6,000 characters, half copies of registered chapters
   (verbatim, edited at 5 % and 10 %, ads spliced in, one text mirrored on three hosts), half unrelated text,
   on hosts of 20,000 pages each; plus the copies planted for the new works (step 6). Each page goes through
   what a crawl does after the fetch: the crawl's ``PageStore`` (batches of 32, one transaction each), then
   ``process_pages`` on the stored ids, as a worker's task does (fingerprint, index, compare, record), in
   ``--fill-processes`` processes (niced by ``--nice``) over contiguous slices. Progress on stderr. Then
   every site with pages compared since it last settled is settled (``settle_sites``), as each crawl does at
   its end: its template decided and kept with it, which a newly registered work then uses (step 6).
3. **Bytes per page**: ``VACUUM ANALYZE``, then ``pg_total_relation_size`` summed over every table of the
   database (whatever tables the schema has), divided by the rows of ``pages``; the per-table breakdown.
4. **Compare per page**: three batches of 32 new pages (half copies) stored, then ``process_pages`` on each
   in this process; the first batch untimed (caches, anything a long-running worker holds), the other two
   timed: wall and CPU ms per page, and CPU less ``fingerprint_text`` of the same pages (compare, index,
   record).
5. **Crawl of a fresh site** of ``--crawl-pages`` chapter pages (a new site per size, half copies of
   registered chapters, in the template of ``pipeline_site``) served on 127.0.0.1: ``fptrack crawl --depth
   2`` with 2 ``fptrack worker -c 1`` processes over Redis (``--redis``, a queue of this run's own); wall time
   until the crawl returns; ``--crawl-runs`` sites, each new, and the fastest is the figure (a burst of
   another process on these 2 cores only ever slows a crawl). The product paces a site at
   ``FPTRACK_SITE_RATE`` (1 request/s by default): the benchmark sets it to 1000 (and AutoThrottle off,
   concurrency ``--concurrency`` on the one site): the figure is the pipeline's throughput, not a polite
   crawl's.
6. **A new work finds its copies**: the 1M-character work (200 chapters) planted for this size is registered
   with ``fptrack works add`` (no broker: the retroactive re-compare runs in the command); its wall time is
   the time until its matches are recorded. Its copies were planted during the fill, spread over the stored
   pages: 40 verbatim, 40 edited (5 %), 40 mirrored on three hosts each, 80 excerpts of 300 or 1,000
   characters inside unrelated text. Recall per kind from ``fptrack matches --work``.

Prints one row per (registry, size) with the issue's targets beside the figures and the per-table bytes, and
ends with one JSON line. Needs PostgreSQL (``--postgres``), Redis and ``../shared/corpus``
(``FPTRACK_CORPUS``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from benchmarks.corpus import CORPUS, require_corpus
from benchmarks.harness import arguments, emit, machine, print_table, progress, require_service
from benchmarks.pipeline.throughput import (
    CRAWL_LINE,
    Services,
    base_env,
    fptrack,
    workers,
)
from benchmarks.scale._data import HOST_PAGES, Planted, Registry, fresh_site, new_work_of_size, planted_copies
from benchmarks.scale._fill import (
    Plan,
    compare_probe,
    database_bytes,
    fill,
    register_registry,
    settle_filled,
)
from benchmarks.scale._replicate import replicate
from testbed.sites import serve_site

TARGET_BYTES_PER_PAGE = 25_000
TARGET_CRAWL_SLOWDOWN = 1.25  # pages/s at the first size over pages/s at the largest
TARGET_COMPARE_GROWTH = 1.5  # per-page compare, largest registry over smallest, same size
TARGET_NEW_WORK_SECONDS = 30.0
KINDS = ("verbatim", "edited", "mirror", "excerpt")
REGISTERED = re.compile(r"registered work #(\d+)")


def libpq_dsn(url: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def crawl_fresh(
    registry: Registry,
    plan: Plan,
    workdir: Path,
    services: Services,
    args: argparse.Namespace,
    label: str,
    seed: int,
) -> dict[str, Any]:
    """``fptrack crawl`` of a new site with 2 workers over Redis: pages, wall seconds, pages/s."""
    served, copies = fresh_site(registry, registry.pools, pages=args.crawl_pages, seed=seed)
    data_dir = workdir / f"crawl-{label}"
    data_dir.mkdir()
    env = base_env(data_dir, plan.database_url, args.concurrency)
    queue = f"fptrack_scale_{os.getpid()}_{label}"
    env.update(FPTRACK_BROKER_URL=args.redis, FPTRACK_TASK_QUEUE=queue)
    progress(f"{label}: crawling a fresh site of {len(served):,} pages with 2 workers")
    with serve_site(served) as base:
        try:
            with workers(env, 2, data_dir):
                crawl, wall = fptrack(
                    env, "crawl", base + "/", "--depth", "2", "--max-pages", str(len(served) + 10), "-q",
                    timeout=600 + 20 * len(served),
                )  # fmt: skip
        finally:
            for name in (
                queue,
                f"{queue}.crawls",
            ):  # the product's crawl-job queue is named after the task queue
                services.forget_queue(name)
    summary = CRAWL_LINE.search(crawl.stdout)
    if summary is None:
        raise RuntimeError(f"no summary line in the crawl's output:\n{crawl.stdout[-2000:]}")
    pages = int(summary.group(1))
    return {
        "pages": pages,
        "failed": int(summary.group(4)),
        "copies_on_site": copies,
        "wall_s": round(wall, 2),
        "pages_per_second": round(pages / wall, 2),
    }


def recall(planted: dict[int, Planted], work: int, found: set[tuple[str, int]]) -> dict[str, Any]:
    """Planted copies of ``work`` found, per kind, from the (page URL, chapter index) of its matches."""
    wanted = [p for p in planted.values() if p.work == work]
    total = Counter(p.kind for p in wanted)
    hits = Counter(p.kind for p in wanted if (p.url, p.chapter) in found)
    planted_urls = {(p.url, p.chapter) for p in wanted}
    return {
        "planted": dict(total),
        "found": {k: hits.get(k, 0) for k in total},
        "recall": {k: round(hits.get(k, 0) / total[k], 4) for k in total},
        "other_matches": len(found - planted_urls),
    }


def new_work(
    registry: Registry,
    plan: Plan,
    planted: dict[int, Planted],
    size: int,
    workdir: Path,
    args: argparse.Namespace,
) -> dict[str, Any]:
    """Register the work planted for ``size`` with ``fptrack works add`` (in-process retroactive check):
    wall seconds, and the recall of its planted copies."""
    number = new_work_of_size(plan.sizes, size)
    title, text = registry.work_file(number)
    path = workdir / f"new-work-{size}.txt"
    path.write_text(text, encoding="utf-8")
    data_dir = workdir / f"new-work-{size}"
    data_dir.mkdir()
    env = base_env(data_dir, plan.database_url, args.concurrency)
    progress(f"registering the {len(text):,}-character work planted for {size:,} pages")
    added, seconds = fptrack(env, "works", "add", str(path), "--title", title)
    registered = REGISTERED.search(added.stdout)
    if registered is None:
        raise RuntimeError(f"no work id in the output of works add:\n{added.stdout[-2000:]}")
    listing, _ = fptrack(env, "matches", "--format", "json", "--work", registered.group(1))
    found = {
        (str(m["page_url"]), int(m["chapter_index"]))
        for m in (json.loads(line) for line in listing.stdout.splitlines() if line.strip())
    }
    return {"characters": len(text), "seconds": round(seconds, 2), **recall(planted, number, found)}


def run_registry(
    chapters: int, sizes: list[int], services: Services, workdir: Path, args: argparse.Namespace
) -> list[dict[str, Any]]:
    label = f"r{chapters}"
    database_url = services.fresh_database(f"scale_{label}")
    data_dir = workdir / label
    data_dir.mkdir()
    fptrack(base_env(data_dir, database_url, args.concurrency), "init")
    plan = Plan(
        database_url, str(data_dir), chapters, tuple(sizes), args.seed,
        "" if args.generated_text else str(CORPUS), args.nice,
    )  # fmt: skip
    registry = Registry(plan.pools(), chapters, seed=args.seed)
    planted = planted_copies(sizes, seed=args.seed)
    progress(f"{label}: registering {chapters:,} chapters ({registry.works} works)")
    register_seconds = register_registry(plan, args.fill_processes, progress)
    services.analyze(database_url)
    rows: list[dict[str, Any]] = []
    filled = 0
    for index, size in enumerate(sizes):
        row: dict[str, Any] = {
            "registry": chapters,
            "size": size,
            "register_registry_s": round(register_seconds, 1),
        }
        started = time.monotonic()
        if args.replicate_from and size > args.replicate_from:
            if filled < args.replicate_from:
                raise SystemExit(f"--replicate-from {args.replicate_from:,} must be one of --sizes")
            progress(f"{label}: replicating pages {filled:,}-{size:,} from the first {args.replicate_from:,}")
            registered = [new_work_of_size(sizes, s) for s in sizes if s < size]
            row["replicated"] = replicate(
                libpq_dsn(database_url), args.replicate_from, filled, size, planted, registered, progress
            )
            # the new works' planted pages among the copied numbers, through the product's fill
            times, wall = fill(plan, filled, size, args.fill_processes, progress, only=list(planted))
        else:
            times, wall = fill(plan, filled, size, args.fill_processes, progress)
        filled = size
        row["fill"] = {
            "pages": times.pages,
            "wall_s": round(wall, 1),
            "pages_per_second": round(times.pages / wall, 1),
            "process_pages_ms_per_page": round(times.process_wall_s * 1000 / max(1, times.pages), 2),
            "process_pages_cpu_ms_per_page": round(times.process_cpu_s * 1000 / max(1, times.pages), 2),
            "store_ms_per_page": round(times.store_s * 1000 / max(1, times.pages), 2),
            "generate_ms_per_page": round(times.generate_s * 1000 / max(1, times.pages), 2),
        }
        sites, settle_wall = settle_filled(plan, args.fill_processes, progress)
        row["settle"] = {"sites": sites, "wall_s": round(settle_wall, 1)}
        progress(f"{label} {size:,}: VACUUM ANALYZE and table sizes")
        sizes_now = database_bytes(libpq_dsn(database_url))
        row["bytes"] = {
            "total": sizes_now["total"],
            "pages": sizes_now["pages"],
            "per_page": round(sizes_now["total"] / max(1, sizes_now["pages"])),
            "tables": sizes_now["tables"],
        }
        progress(f"{label} {size:,}: compare probe")
        row["compare"] = compare_probe(plan, index)
        crawls = [
            crawl_fresh(
                registry, plan, workdir, services, args, f"{label}-{size}-{run}",
                args.seed * 100 + index + 50 * run,
            )
            for run in range(args.crawl_runs)
        ]  # fmt: skip
        # the fastest of the runs: another process's burst on these 2 cores only ever slows a crawl down
        row["crawl"] = {
            **max(crawls, key=lambda c: c["pages_per_second"]),
            "runs_pages_per_second": [c["pages_per_second"] for c in crawls],
        }
        row["new_work"] = new_work(registry, plan, planted, size, workdir, args)
        row["seconds"] = round(time.monotonic() - started, 1)
        progress(
            f"{label} {size:,}: fill {row['fill']['pages_per_second']} pages/s, crawl "
            f"{row['crawl']['pages_per_second']} pages/s, {row['bytes']['per_page']:,} bytes/page, new work "
            f"{row['new_work']['seconds']} s, recall {row['new_work']['recall']}"
        )
        rows.append(row)
    return rows


def report(
    rows: list[dict[str, Any]], services: Services, args: argparse.Namespace, info: dict[str, Any]
) -> dict[str, Any]:
    """Print the tables; returns the targets' figures for the JSON line."""
    print(
        "scale: fptrack on PostgreSQL as the stored pages and the registry grow (benchmarks/scale/pages.py)"
    )
    print(
        f"machine: {info.get('cpu', '?')}, {info['cores']} cores, {info.get('ram_gb', '?')} GB RAM, "
        f"PostgreSQL {services.postgres_version} (autovacuum {services.postgres_autovacuum}; the benchmark "
        f"runs ANALYZE after registering and VACUUM ANALYZE after each fill); fresh crawl: "
        f"{args.crawl_pages:,} chapter pages, FPTRACK_SITE_RATE=1000, AutoThrottle off, "
        f"FPTRACK_CRAWL_CONCURRENCY={args.concurrency}, 2 workers; fill: {args.fill_processes} processes, "
        f"nice {args.nice}"
    )
    first_crawl = {r["registry"]: r["crawl"]["pages_per_second"] for r in reversed(rows)}
    table = []
    for r in rows:
        slowdown = (
            first_crawl[r["registry"]] / r["crawl"]["pages_per_second"]
            if r["crawl"]["pages_per_second"]
            else 0
        )
        rec = r["new_work"]["recall"]
        table.append(
            [
                f"{r['size']:,}",
                f"{r['registry']:,}",
                f"copied in {r['replicated']['seconds']:.0f} s"
                if "replicated" in r
                else r["fill"]["pages_per_second"],
                r["settle"]["wall_s"],
                r["crawl"]["pages_per_second"],
                f"{slowdown:.2f}x",
                r["compare"]["process_pages_wall_ms"],
                r["compare"]["compare_cpu_ms"],
                f"{r['bytes']['per_page']:,}",
                r["new_work"]["seconds"],
                *(f"{rec.get(k, 0):.2f}" for k in KINDS),
                r["new_work"]["other_matches"],
            ]
        )
    print_table(
        "Per size (fill: pages/s of the bulk path, or the seconds the pages past --replicate-from took to "
        "copy; "
        "settle: every filled site settled, as its crawl would; "
        "crawl: `fptrack crawl` of a fresh site, 2 workers; "
        "slowdown: pages/s at the first size over this one; compare: process_pages per page, wall, and CPU "
        "less fingerprinting; new work: `fptrack works add` of a 1M-character work until its matches are "
        "recorded; recall of its planted copies)",
        ["pages", "registry", "fill p/s", "settle s", "crawl p/s", "slowdown", "compare ms", "cmp cpu ms",
         "bytes/page", "new work s", *(f"recall {k}" for k in KINDS), "other"],
        table,
    )  # fmt: skip
    print(
        f"targets: bytes/page <= {TARGET_BYTES_PER_PAGE:,}; crawl slowdown at 1M pages <= "
        f"{TARGET_CRAWL_SLOWDOWN}x of 10k; compare ms 1,000 -> 100,000 chapters <= {TARGET_COMPARE_GROWTH}x; "
        f"new work <= {TARGET_NEW_WORK_SECONDS:g} s; recall 1.00 every kind"
    )
    targets: dict[str, Any] = {
        "bytes_per_page": {
            "target": TARGET_BYTES_PER_PAGE,
            "measured": max(r["bytes"]["per_page"] for r in rows),
        },
        "new_work_seconds": {
            "target": TARGET_NEW_WORK_SECONDS,
            "measured": max(r["new_work"]["seconds"] for r in rows),
        },
        "crawl_slowdown": {
            "target": TARGET_CRAWL_SLOWDOWN,
            "measured": {
                str(c): round(
                    first_crawl[c] / [r for r in rows if r["registry"] == c][-1]["crawl"]["pages_per_second"],
                    3,
                )
                for c in first_crawl
            },
            "largest_size": max(r["size"] for r in rows),
        },
        "recall_min": {"target": 1.0, "measured": min(min(r["new_work"]["recall"].values()) for r in rows)},
    }
    registries = sorted({r["registry"] for r in rows})
    growth = []
    if len(registries) > 1:
        for size in sorted({r["size"] for r in rows}):
            by = {r["registry"]: r["compare"]["process_pages_wall_ms"] for r in rows if r["size"] == size}
            if registries[0] in by and registries[-1] in by and by[registries[0]]:
                growth.append(
                    [
                        f"{size:,}",
                        by[registries[0]],
                        by[registries[-1]],
                        f"{by[registries[-1]] / by[registries[0]]:.2f}x",
                    ]
                )
        print_table(
            f"Compare per page, {registries[0]:,} -> {registries[-1]:,} registered chapters "
            f"(target <= {TARGET_COMPARE_GROWTH}x)",
            ["pages", f"ms, {registries[0]:,}", f"ms, {registries[-1]:,}", "growth"],
            growth,
        )
    targets["compare_growth"] = {"target": TARGET_COMPARE_GROWTH, "measured": [g[-1] for g in growth] or None}
    for r in rows:
        total = r["bytes"]["total"]
        pages = max(1, r["bytes"]["pages"])
        print_table(
            f"PostgreSQL after VACUUM ANALYZE, registry {r['registry']:,}, {r['bytes']['pages']:,} rows in "
            f"pages ({total / 1e6:,.1f} MB in all)",
            ["table", "total MB", "heap+TOAST MB", "indexes MB", "bytes/page", "share"],
            [
                [name, round(t["total"] / 1e6, 2), round(t["table"] / 1e6, 2), round(t["indexes"] / 1e6, 2),
                 f"{t['total'] / pages:,.0f}", f"{t['total'] / max(1, total):.1%}"]
                for name, t in r["bytes"]["tables"].items()
                if t["total"] >= 0.001 * total
            ],
        )  # fmt: skip
    return targets


def main() -> None:
    parser = arguments(__doc__, "600 pages, a 200-chapter registry, one fresh site of 40 pages")
    parser.add_argument(
        "--sizes", help="stored pages to measure at (default 10000,100000,1000000; quick 600)"
    )
    parser.add_argument(
        "--registry", help="registered chapters, one database each (default 1000,100000; quick 200)"
    )
    parser.add_argument(
        "--crawl-pages", type=int, default=2000, help="chapter pages of the fresh site (default 2,000)"
    )
    parser.add_argument(
        "--crawl-runs", type=int, default=2,
        help="fresh sites crawled at each size, each new; the fastest is the figure (default 2)",
    )  # fmt: skip
    parser.add_argument(
        "--concurrency", type=int, default=8, help="FPTRACK_CRAWL_CONCURRENCY of the fresh crawl"
    )
    parser.add_argument("--fill-processes", type=int, default=2, help="processes filling the database")
    parser.add_argument("--nice", type=int, default=5, help="niceness of the fill processes (0: none)")
    parser.add_argument(
        "--postgres",
        default=os.environ.get("FPTRACK_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"),
        help="PostgreSQL server where this run creates (and drops) its own databases",
    )
    parser.add_argument(
        "--redis",
        default=os.environ.get("FPTRACK_BENCH_SCALE_REDIS_URL", "redis://127.0.0.1:6379/12"),
        help="Redis broker of the fresh crawl's workers (a queue of this run's own)",
    )
    parser.add_argument(
        "--replicate-from", type=int, default=0, metavar="PAGES",
        help="sizes past PAGES (one of --sizes, a multiple of 20,000) are made by copying the pages filled "
        "below it, rows and all, under new numbers, and filling only the new works' planted pages "
        "(benchmarks/scale/_replicate.py); 0: every size through the product's fill (default)",
    )  # fmt: skip
    parser.add_argument("--generated-text", action="store_true", help="random Han text instead of the corpus")
    parser.add_argument("--seed", type=int, default=9)
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder and the databases")
    args = parser.parse_args()
    if args.quick:
        args.crawl_pages, args.crawl_runs = 40, 1
    require_service("scale", "PostgreSQL", args.postgres, 5432)
    require_service("scale", "Redis", args.redis, 6379)
    if not args.generated_text:
        require_corpus("scale")
    sizes = sorted(
        {
            int(s)
            for s in (args.sizes or ("600" if args.quick else "10000,100000,1000000")).split(",")
            if s.strip()
        }
    )
    registries = [
        int(s) for s in (args.registry or ("200" if args.quick else "1000,100000")).split(",") if s.strip()
    ]
    # a new work's 280 planted pages take at most half of a size's pages (_data.planted_copies)
    if not sizes or min(sizes) < 600 or not registries or min(registries) < 1:
        parser.error("need --sizes of at least 600 pages and --registry of at least 1 chapter")
    if args.crawl_pages < 2 or args.fill_processes < 1 or args.crawl_runs < 1:
        parser.error("need --crawl-pages >= 2, --crawl-runs >= 1 and --fill-processes >= 1")
    if args.replicate_from and (
        args.replicate_from not in sizes
        or args.replicate_from % HOST_PAGES
        or any(s % args.replicate_from for s in sizes if s > args.replicate_from)
    ):
        parser.error(
            f"--replicate-from must be one of --sizes, a multiple of {HOST_PAGES:,} (the pages of a host), "
            "dividing every larger size"
        )

    started = time.monotonic()
    info = machine()
    services = Services(args.postgres, args.redis)
    services.probe()
    if services.postgres_problem or services.redis_problem:
        raise SystemExit(services.postgres_problem or services.redis_problem)
    workdir = Path(tempfile.mkdtemp(prefix="fptrack-scale-"))
    rows: list[dict[str, Any]] = []
    try:
        for chapters in registries:
            rows.extend(run_registry(chapters, sizes, services, workdir, args))
    finally:
        if args.keep:
            print(f"kept {workdir} and databases {', '.join(services.created) or '(none)'}", file=sys.stderr)
        else:
            try:
                services.drop_created()
            finally:
                shutil.rmtree(workdir, ignore_errors=True)
    targets = report(rows, services, args, info)
    emit(
        {
            "benchmark": "scale",
            "quick": args.quick,
            "machine": {**info, "postgresql": services.postgres_version},
            "sizes": sizes,
            "registries": registries,
            "rows": rows,
            "targets": targets,
            "seconds": round(time.monotonic() - started, 1),
        }
    )


if __name__ == "__main__":
    main()
