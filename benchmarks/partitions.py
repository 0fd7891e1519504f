"""``fptrack db partition`` on a database of a few thousand fingerprinted pages (issue 20): how long the
conversion holds its locks (no row is copied: the heap is read once for the ``CHECK``), and what a newly
registered work's look-up (:func:`storage.code_index.pages_sharing`) costs on the same rows kept three ways,
with ``EXPLAIN`` showing one GIN probe per partition:

- **plain**: one ``page_codes`` table (the baseline);
- **converted**: that table after ``partition_page_codes`` (every row in the first range, plus the empty
  ranges ahead and the default);
- **spread**: a second database filled with the same pages after partitioning its empty table, the upkeep
  (:func:`storage.partitions.ensure_partitions_ahead`) run after every batch, so that the rows spread over
  ranges of ``--per-partition`` ids, as they will on a store partitioned early.

Pages are random Han text of 6,000 characters, every tenth holding a chapter of the demo's lighthouse.txt,
stored and fingerprinted through the product (:func:`compare.service.process_pages`), the same pages (same
seed, same ids) in both databases (``fptrack_bench_part_<pid>_*``, dropped at the end). The query is the
union of the samples of 20 stored pages (a work 20 of whose chapters were copied), timed ``--repeat`` times
warm (median). Prints a table, then one JSON line.

    nice -n 5 .venv/bin/python -m benchmarks.partitions --pages 3000 --per-partition 400
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.orm import Session

from benchmarks._tables import print_table
from fptrack.cli.demo import demo_chapters
from fptrack.compare import service
from fptrack.core.settings import Settings
from fptrack.storage.code_index import pages_sharing
from fptrack.storage.db import create_engine_for, migrate
from fptrack.storage.fingerprints import load_page_samples
from fptrack.storage.models import Page
from fptrack.storage.partitions import ensure_partitions_ahead, partition_page_codes, partition_report

SERVER = "postgresql+psycopg://postgres@127.0.0.1:5432/"


def fill(session: Session, settings: Settings, pages: int, seed: int, *, upkeep: bool = False) -> None:
    rng = np.random.default_rng(seed)
    chapters = demo_chapters("lighthouse.txt")
    batch: list[int] = []
    for number in range(pages):
        body = "".join(chr(0x4E00 + int(c)) for c in rng.integers(0, 6000, 6000))
        if number % 10 == 5:
            chapter = chapters[number // 10 % len(chapters)]
            body = body[:1000] + chapter + body[1000 + len(chapter) :]
        url = f"http://bench.test/{number}"
        page = Page(url=url, final_url=url, host="bench.test", status=200, title="t", text=body)
        session.add(page)
        session.flush()
        batch.append(page.id)
        if len(batch) == 64 or number == pages - 1:
            service.process_pages(session, batch, settings)
            session.commit()
            batch = []
            if upkeep:
                ensure_partitions_ahead(session)
                session.commit()
    session.execute(text("ANALYZE page_codes"))
    session.commit()


def query_codes(session: Session, pages: int) -> list[int]:
    picked = list(range(1, pages + 1, max(1, pages // 20)))[:20]
    samples = load_page_samples(session, picked)
    return sorted(set(np.concatenate(list(samples.values())).tolist()))


def time_lookup(session: Session, sample: list[int], repeat: int) -> tuple[float, int]:
    times, found = [], 0
    for _ in range(repeat):
        start = time.perf_counter()
        found = len(pages_sharing(session, sample))
        times.append(time.perf_counter() - start)
        session.rollback()
    return statistics.median(times), found


def explain(session: Session, sample: list[int]) -> list[str]:
    """The plan's nodes (the conditions, which spell out the whole array, left out)."""
    session.execute(text("SET enable_seqscan = off"))
    rows = session.execute(
        text("EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) SELECT page_id FROM page_codes WHERE sample && :s"),
        {"s": "{" + ",".join(map(str, sample)) + "}"},
    )
    lines = [str(row[0]) for row in rows if "Cond:" not in str(row[0])]
    session.rollback()
    return lines


@contextmanager
def scratch_database(suffix: str) -> Iterator[tuple[Settings, Engine]]:
    name = f"fptrack_bench_part_{os.getpid()}_{suffix}"
    admin = create_engine(SERVER + "postgres", isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    settings = Settings(database_url=f"postgresql://postgres@127.0.0.1:5432/{name}")
    engine = create_engine_for(settings)
    try:
        migrate(settings, engine)
        yield settings, engine
    finally:
        engine.dispose()
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--pages", type=int, default=3000)
    parser.add_argument("--per-partition", type=int, default=400, help="page ids per range")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--seed", type=int, default=20)
    args = parser.parse_args()
    result: dict[str, Any] = {"pages": args.pages, "per_partition": args.per_partition}
    plans: dict[str, list[str]] = {}
    with scratch_database("plain") as (settings, engine):
        start = time.perf_counter()
        with Session(engine) as session:
            fill(session, settings, args.pages, args.seed)
        result["fill_s"] = round(time.perf_counter() - start, 1)
        with Session(engine) as session:
            codes = query_codes(session, args.pages)
            heap = int(session.scalar(text("SELECT pg_relation_size('page_codes')")) or 0)
            total = int(session.scalar(text("SELECT pg_total_relation_size('page_codes')")) or 0)
            start = time.perf_counter()  # the CHECK the conversion adds, alone (its heap scan), rolled back
            session.execute(text("ALTER TABLE page_codes ADD CONSTRAINT bench_bound CHECK (page_id < 1e12)"))
            result["heap_scan_ms"] = round((time.perf_counter() - start) * 1000, 1)
            session.rollback()
            plain, found_plain = time_lookup(session, codes, args.repeat)
            plans["plain"] = explain(session, codes)
        start = time.perf_counter()
        partition_page_codes(engine, pages_per_partition=args.per_partition, ahead=2)
        result["convert_ms"] = round((time.perf_counter() - start) * 1000, 1)
        with Session(engine) as session:
            session.execute(text("ANALYZE page_codes"))
            session.commit()
            converted, found_converted = time_lookup(session, codes, args.repeat)
            plans["converted"] = explain(session, codes)
            result["partitions_converted"] = len(partition_report(session))
    with scratch_database("spread") as (settings, engine):
        partition_page_codes(engine, pages_per_partition=args.per_partition, ahead=2)
        with Session(engine) as session:
            fill(session, settings, args.pages, args.seed, upkeep=True)
        with Session(engine) as session:
            spread, found_spread = time_lookup(session, codes, args.repeat)
            plans["spread"] = explain(session, codes)
            report = partition_report(session)
            result["partitions_spread"] = len(report)
            result["rows_spread"] = [p.rows for p in report]
    result.update(
        heap_bytes_per_page=round(heap / args.pages),
        total_bytes_per_page=round(total / args.pages),
        query_codes=len(codes),
        lookup_plain_ms=round(plain * 1000, 1),
        lookup_converted_ms=round(converted * 1000, 1),
        lookup_spread_ms=round(spread * 1000, 1),
        ratio_converted_to_plain=round(converted / plain, 2),
        ratio_spread_to_plain=round(spread / plain, 2),
        pages_found=[found_plain, found_converted, found_spread],
        gin_probes_spread=sum("Bitmap Index Scan" in line for line in plans["spread"]),
        load=round(os.getloadavg()[0], 2),
    )
    print_table(
        f"page_codes by page id: {args.pages:,} pages, {args.per_partition:,} ids per range, "
        f"{len(codes):,} query codes",
        ["what", "value"],
        [
            ("fill (process_pages), plain database", f"{result['fill_s']} s"),
            ("heap / total per page", f"{heap // args.pages} B / {total // args.pages} B"),
            ("the CHECK alone (its heap scan)", f"{result['heap_scan_ms']} ms"),
            ("conversion (one transaction)", f"{result['convert_ms']} ms"),
            ("pages_sharing, plain", f"{result['lookup_plain_ms']} ms"),
            (f"pages_sharing, converted ({result['partitions_converted']} partitions)",
             f"{result['lookup_converted_ms']} ms (x{result['ratio_converted_to_plain']})"),
            (f"pages_sharing, spread ({result['partitions_spread']} partitions)",
             f"{result['lookup_spread_ms']} ms (x{result['ratio_spread_to_plain']})"),
            ("pages found plain / converted / spread", " / ".join(map(str, result["pages_found"]))),
            ("load (1 min) at the end", result["load"]),
        ],
    )  # fmt: skip
    for name, lines in plans.items():
        print(f"EXPLAIN {name}:\n  " + "\n  ".join(lines))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
