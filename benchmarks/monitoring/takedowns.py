"""Takedown figures at scale, on PostgreSQL: ``analytics.takedowns.takedown_stats`` (overall, per host, per
work) and the re-check scheduler's look-up (``jobs.rechecks.due_matches``) over N matches, against a baseline
measured in the same run: the same figures computed in Python from every match row (what a dashboard without
the grouped queries would do). Both answers are compared, so the speed-up is for the same numbers.

    python -m benchmarks.monitoring.takedowns --quick        # N = 10k, 200 hosts, 20 works, once
    python -m benchmarks.monitoring.takedowns --n 1000000

In a database of its own (``--db`` on ``--pg-url``, created and dropped): the real schema (Alembic),
``--works`` works with a chapter each, N pages over ``--hosts`` hosts, one match per page (80 % flagged, 10 %
confirmed, 10 % dismissed; 70 % re-checked, 40 % of those taken down between 1 hour and 30 days after first
seen), made by SQL ``generate_series`` (untimed), then VACUUM ANALYZE. Each timing is the best of ``--repeat``
runs. Prints a table; the last line is JSON with every figure."""

from __future__ import annotations

import os
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import numpy as np
from sqlalchemy import create_engine, select, text
from sqlalchemy.orm import Session

from benchmarks.harness import arguments, emit, machine, require_service
from fptrack.analytics.takedowns import STATUSES, TakedownRow, takedown_stats
from fptrack.core.settings import Settings
from fptrack.jobs.rechecks import due_matches
from fptrack.storage.compressed import compress_text
from fptrack.storage.db import create_engine_for, migrate
from fptrack.storage.models import Match, Page, Work

FILL = """
INSERT INTO works (id, title, source_name, encoding, content_sha256, text, created_at)
SELECT w, 'work ' || w, '', 'utf-8', md5(w::text) || md5(w::text), 'x', now() \
FROM generate_series(1, :works) w;
INSERT INTO chapters (id, work_id, index, title, start, "end", text_z)
SELECT w, w, 1, 'chapter', 0, 1, :chapter_text FROM generate_series(1, :works) w;
INSERT INTO pages (id, url, final_url, host, status, encoding, title, text_z, content_sha256, snapshot_sha256,
                   fetched_at, content_type, error, template_masked, etag, last_modified)
SELECT p, 'http://h' || (p % :hosts) || '.test/' || p, 'http://h' || (p % :hosts) || '.test/' || p,
       'h' || (p % :hosts) || '.test', 200, 'utf-8', '', ''::bytea, '', '', now(), '', '', false, '', ''
FROM generate_series(1, :n) p;
INSERT INTO matches (id, page_id, work_id, chapter_id, score, methods, spans, status, first_seen, last_seen,
                     rechecked_at, recheck_state, taken_down_at)
SELECT p, p, 1 + p % :works, 1 + p % :works, 0.9, '[]', '[]', s.status, s.seen, s.seen,
       CASE WHEN s.checked THEN s.seen + interval '31 days' END,
       CASE WHEN NOT s.checked THEN NULL WHEN s.down THEN (CASE WHEN p % 2 = 0 THEN 'gone' ELSE 'removed' END)
            WHEN p % 7 = 0 THEN 'error' ELSE 'present' END,
       CASE WHEN s.checked AND s.down THEN s.seen + (interval '1 hour' + random() * interval '30 days') END
FROM generate_series(1, :n) p,
LATERAL (SELECT CASE WHEN r < 0.8 THEN 'flagged' WHEN r < 0.9 THEN 'confirmed' ELSE 'dismissed' END AS status,
                timestamptz '2026-01-01' + random() * interval '300 days' AS seen,
                c < 0.7 AS checked, d < 0.4 AS down
         FROM (SELECT random() + 0 * p AS r, random() + 0 * p AS c, random() + 0 * p AS d) x) s;
SELECT setval(pg_get_serial_sequence('matches', 'id'), :n);
"""


def best_of(repeat: int, run: Callable[[], Any]) -> tuple[float, Any]:
    best, result = float("inf"), None
    for _ in range(repeat):
        started = time.perf_counter()
        result = run()
        best = min(best, time.perf_counter() - started)
    return best, result


def naive(session: Session, by: str) -> list[TakedownRow]:
    """The baseline: every flagged and confirmed match row into Python, then the same figures."""
    if by == "host":
        key: Any = Page.host
        statement = select(key, Match.recheck_state, Match.first_seen, Match.taken_down_at).join(
            Page, Page.id == Match.page_id
        )
    elif by == "work":
        key = Work.title + " (#" + Work.id.cast(Work.title.type) + ")"
        statement = select(key, Match.recheck_state, Match.first_seen, Match.taken_down_at).join(
            Work, Work.id == Match.work_id
        )
    else:
        statement = select(
            text("'all'"), Match.recheck_state, Match.first_seen, Match.taken_down_at
        ).select_from(Match)
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    durations: dict[str, list[float]] = defaultdict(list)
    for k, state, seen, down in session.execute(statement.where(Match.status.in_(STATUSES))):
        row = counts[str(k)]
        row[0] += 1
        row[1] += state is not None
        if down is not None:
            row[2] += 1
            durations[str(k)].append((down - seen).total_seconds())
    rows = []
    for k, (n, c, t) in counts.items():
        values = durations.get(k)
        median, p90 = np.percentile(np.asarray(values), [50, 90]) if values else (None, None)
        rows.append(
            TakedownRow(
                k,
                n,
                c,
                t,
                None if median is None else round(float(median), 1),
                None if p90 is None else round(float(p90), 1),
            )
        )
    return sorted(rows, key=lambda r: (-r.matches, r.key))


def same(a: list[TakedownRow], b: list[TakedownRow]) -> bool:
    if [(r.key, r.matches, r.checked, r.taken_down) for r in a] != [
        (r.key, r.matches, r.checked, r.taken_down) for r in b
    ]:
        return False
    close = [
        abs((x or 0) - (y or 0)) <= 0.2
        for r, s in zip(a, b, strict=True)
        for x, y in ((r.median_seconds, s.median_seconds), (r.p90_seconds, s.p90_seconds))
    ]
    return all(close)


def main(argv: list[str] | None = None) -> None:
    parser = arguments(__doc__, "N = 10,000, 200 hosts, 20 works, timed once")
    parser.add_argument("--n", type=int, default=1_000_000, help="matches (one page each)")
    parser.add_argument("--hosts", type=int, default=2_000)
    parser.add_argument("--works", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--pg-url",
        default=os.environ.get("FPTRACK_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"),
    )
    parser.add_argument("--db", default="fptrack_bench_takedowns", help="database to create (and drop)")
    args = parser.parse_args(argv)
    if args.quick:
        args.n, args.hosts, args.works, args.repeat = 10_000, 200, 20, 1
    require_service("takedown_stats", "PostgreSQL", args.pg_url, 5432)
    admin = create_engine(Settings(database_url=args.pg_url).database_url, isolation_level="AUTOCOMMIT")
    db_url = urlsplit(args.pg_url)._replace(path="/" + args.db).geturl()
    with admin.connect() as c:
        c.execute(text(f'DROP DATABASE IF EXISTS "{args.db}" WITH (FORCE)'))
        c.execute(text(f'CREATE DATABASE "{args.db}"'))
    settings = Settings(database_url=db_url)
    engine = create_engine_for(settings)
    results: dict[str, Any] = {"n": args.n, "hosts": args.hosts, "works": args.works, "machine": machine()}
    try:
        migrate(settings, engine)
        started = time.perf_counter()
        with engine.begin() as c:
            for statement in FILL.split(";\n"):
                if statement.strip():
                    # chapter and page texts are stored compressed (storage.compressed)
                    c.execute(
                        text(statement),
                        {
                            "n": args.n,
                            "hosts": args.hosts,
                            "works": args.works,
                            "chapter_text": compress_text("x"),
                        },
                    )
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as c:
            c.execute(text("VACUUM ANALYZE"))
        results["fill_seconds"] = round(time.perf_counter() - started, 1)
        print(f"{'step':<26}{'takedown_stats s':>18}{'baseline s':>14}{'speed-up':>10}  same answer")
        with Session(engine) as session:
            for by in ("all", "host", "work"):
                fast, ours = best_of(args.repeat, lambda by=by: takedown_stats(session, by))  # type: ignore[misc]
                slow, theirs = best_of(args.repeat, lambda by=by: naive(session, by))  # type: ignore[misc]
                agree = same(ours, theirs)
                results[f"by_{by}"] = {
                    "seconds": round(fast, 4),
                    "baseline_seconds": round(slow, 4),
                    "speedup": round(slow / fast, 1),
                    "rows": len(ours),
                    "same": agree,
                }
                print(f"{'stats by ' + by:<26}{fast:>18.3f}{slow:>14.3f}{slow / fast:>9.1f}x  {agree}")
            recheck = settings.with_overrides(recheck_after=86400.0 * 30)
            due_time, due = best_of(args.repeat, lambda: due_matches(session, recheck))
            results["due_matches"] = {"seconds": round(due_time, 4), "found": len(due)}
            print(f"{'due_matches (limit 2000)':<26}{due_time:>18.3f}{'':>14}{'':>10}  {len(due)} found")
            (overall,) = takedown_stats(session, "all")
            results["overall"] = overall.as_json()
    finally:
        engine.dispose()
        with admin.connect() as c:
            c.execute(text(f'DROP DATABASE IF EXISTS "{args.db}" WITH (FORCE)'))
        admin.dispose()
    emit(results, sort_keys=True)


if __name__ == "__main__":
    main()
