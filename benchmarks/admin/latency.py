"""Admin latency at scale: the pages a reviewer opens most, over a million matches on PostgreSQL.

    python -m benchmarks.admin.latency --quick           # 5,000 matches, 5 requests a page (a smoke run)
    nice python -m benchmarks.admin.latency              # 1,000,000 matches
    python -m benchmarks.admin.latency --matches 300000 --requests 100 --workers 4

What it does, in a database of its own (created, then dropped at the end unless ``--keep``):
1. migrates the real schema (Alembic), then generates the data in SQL (``generate_series``; no Python loop):
   works with chapters, pages on ``--hosts`` pirate hosts, and the matches (two chapters copied per page),
   spread over a year the way crawls find them (a host's pages in batches on its crawl days), statuses 70 %
   flagged, 15 % confirmed, 10 % dismissed, 5 % licensed. The matches are inserted with the roll-up triggers
   on, as one statement: the load time includes keeping ``match_rollups``;
2. starts the admin under gunicorn (``fptrack serve --production``) on a free port of 127.0.0.1, creates an
   admin account, and logs in over HTTP like a browser (the login form, its CSRF token, the session cookie);
3. times ``--requests`` sequential requests of each page (after a warm-up): the dashboard, the review list
   filtered to flagged matches (page 1 and page 500), a takedown notice (the largest host's confirmed
   matches), the takedowns page (all copies, and one site's), and ``/healthz`` as the baseline (the same
   server and database round trip, no page to build);
4. prints a table (median, p90, p99 per page, and each median against the baseline's) and ends with a JSON
   line.

Targets: every page's median under 200 ms and p99 under 500 ms.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

import requests
from sqlalchemy import create_engine, text

from benchmarks.admin._server import log_in, serve_admin
from benchmarks.harness import arguments, emit, percentile, progress, require_service
from fptrack.core.settings import Settings
from fptrack.services.accounts.users import create_user
from fptrack.storage.compressed import compress_text
from fptrack.storage.db import create_engine_for, migrate, session_factory, session_scope

PASSWORD = "benchmark password 1"
TARGET_MEDIAN_MS = 200.0
TARGET_P99_MS = 500.0


def generate(engine_url: str, matches: int, hosts: int, works: int) -> dict[str, float]:
    """Fill a migrated database with ``matches`` matches; returns timings in seconds."""
    pages = matches // 2
    chapters_per_work = 20
    engine = create_engine(engine_url)
    timings = {}
    with engine.begin() as connection:
        started = time.perf_counter()
        connection.execute(text(
            "INSERT INTO works (id, title, source_name, encoding, content_sha256, text, created_at, "
            "indexed_at) SELECT w, '作品 ' || w, 'w' || w || '.txt', 'utf-8', md5(w::text) || md5('w' || w), "
            "repeat('正文', 50), now() - interval '400 days', now() - interval '400 days' "
            "FROM generate_series(1, :works) AS w"
        ), {"works": works})  # fmt: skip
        connection.execute(text(
            "INSERT INTO chapters (id, work_id, index, title, start, \"end\", text_z) "
            "SELECT (w - 1) * :per + c, w, c, '第' || c || '章', 0, 100, :body "
            "FROM generate_series(1, :works) AS w, generate_series(1, :per) AS c"
        ), {"works": works, "per": chapters_per_work, "body": compress_text("正文" * 50)})  # fmt: skip
        # page i is on host i % hosts; a host's pages are found in batches of 25 on its crawl days, over a
        # year
        connection.execute(text(
            "INSERT INTO pages (id, url, final_url, host, status, encoding, title, text_z, content_sha256, "
            "snapshot_sha256, fetched_at, content_type, error, compared_at, template_masked) "
            "SELECT i, 'http://site' || (i % :hosts) || '.example/book/' || i || '.html', "
            "'http://site' || (i % :hosts) || '.example/book/' || i || '.html', 'site' || (i % :hosts) || "
            "'.example', 200, 'utf-8', '盗版 第' || i || '页', :body, md5(i::text), "
            "md5(i::text), "
            "date_trunc('day', now()) - make_interval(days => ((i / :hosts / 25) * 36 + (i % :hosts) % 36) % "
            "365) + make_interval(mins => i % 600), 'text/html', '', now(), false "
            "FROM generate_series(1, :pages) AS i"
        ), {"hosts": hosts, "pages": pages, "body": compress_text("正文复制" * 40)})  # fmt: skip
        timings["load_pages_s"] = time.perf_counter() - started
        started = time.perf_counter()
        # two chapters of one work per page; a host copies a few works; first seen minutes after the fetch
        connection.execute(text(
            "INSERT INTO matches (page_id, work_id, chapter_id, score, methods, spans, status, first_seen, "
            "last_seen) "
            "SELECT p.id, wk.w, (wk.w - 1) * :per + 1 + (p.id + k) % :per, 0.8 + (p.id % 20) / 100.0, "
            "'[\"winnowing\"]', '[[0, 40, 0, 40]]', "
            "CASE WHEN h.v < 70 THEN 'flagged' WHEN h.v < 85 THEN 'confirmed' WHEN h.v < 95 THEN 'dismissed' "
            "ELSE 'licensed' END, p.fetched_at + make_interval(secs => 30 + (p.id * 7919 + k) % 3600), "
            "p.fetched_at + make_interval(secs => 30 + (p.id * 7919 + k) % 3600) "
            "FROM pages p CROSS JOIN (VALUES (0), (1)) AS ks (k) "
            "CROSS JOIN LATERAL (SELECT 1 + ((p.id % :hosts) * 7 + (p.id / :hosts / 100)) % :works AS w) AS "
            "wk CROSS JOIN LATERAL (SELECT (p.id * 31 + k * 17) % 100 AS v) AS h"
        ), {"per": chapters_per_work, "hosts": hosts, "works": works})  # fmt: skip
        timings["load_matches_s"] = time.perf_counter() - started
        for table in ("works", "chapters", "pages", "matches"):
            connection.execute(text(
                f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), (SELECT max(id) FROM {table}))"
            ))  # fmt: skip
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
        started = time.perf_counter()
        connection.execute(text("VACUUM ANALYZE"))
        timings["vacuum_analyze_s"] = time.perf_counter() - started
        timings["rollup_rows"] = float(
            connection.execute(text("SELECT count(*) FROM match_rollups")).scalar_one()
        )
        timings["matches"] = float(connection.execute(text("SELECT count(*) FROM matches")).scalar_one())
    engine.dispose()
    return timings


def time_page(client: requests.Session, url: str, requests_count: int, warmup: int = 3) -> list[float]:
    for _ in range(warmup):
        client.get(url, timeout=60).raise_for_status()
    samples = []
    for _ in range(requests_count):
        started = time.perf_counter()
        answer = client.get(url, timeout=60)
        answer.content  # noqa: B018 - the whole body, as a browser reads it
        samples.append((time.perf_counter() - started) * 1000)
        answer.raise_for_status()
    return samples


def main() -> None:
    parser = arguments(__doc__, "5,000 matches on 100 hosts, 5 requests a page")
    parser.add_argument("--matches", type=int, default=1_000_000)
    parser.add_argument("--hosts", type=int, default=2000)
    parser.add_argument("--works", type=int, default=200)
    parser.add_argument("--requests", type=int, default=100, help="timed requests per page")
    parser.add_argument("--workers", type=int, default=2, help="gunicorn workers")
    parser.add_argument(
        "--pg-url",
        default=os.environ.get("FPTRACK_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"),
    )
    parser.add_argument("--keep", action="store_true", help="keep the database (its name is printed)")
    args = parser.parse_args()
    if args.quick:
        args.matches, args.hosts, args.works, args.requests = 5_000, 100, 20, 5
    require_service("admin_latency", "PostgreSQL", args.pg_url, 5432)
    if urlsplit(args.pg_url).hostname not in ("127.0.0.1", "localhost", "::1"):
        raise SystemExit("--pg-url must be a PostgreSQL server on this machine (127.0.0.1)")

    name = f"fptrack_bench_admin_{os.getpid()}"
    server_url = Settings(database_url=args.pg_url).database_url
    admin_engine = create_engine(server_url, isolation_level="AUTOCOMMIT")
    with admin_engine.connect() as connection:
        connection.execute(text(f'DROP DATABASE IF EXISTS "{name}"'))
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    data_dir = Path(tempfile.mkdtemp(prefix="fptrack-bench-admin-"))
    database_url = urlsplit(args.pg_url)._replace(path="/" + name).geturl()
    settings = Settings(data_dir=data_dir, database_url=database_url)
    try:
        engine = create_engine_for(settings)
        migrate(settings, engine)
        with session_scope(session_factory(engine)) as session:
            create_user(session, "bench", PASSWORD, "reviewer")  # the notice needs a reviewer
        engine.dispose()
        progress(f"generating {args.matches:,} matches on {args.hosts:,} hosts ...")
        load = generate(settings.database_url, args.matches, args.hosts, args.works)
        top_host = _top_confirmed_host(settings.database_url)

        with serve_admin(database_url, data_dir, args.workers) as server:
            base = server.base
            client = log_in(base, "bench", PASSWORD)
            pages = {
                "healthz (baseline)": "/healthz",
                "dashboard": "/",
                "matches flagged p1": "/matches?status=flagged",
                "matches flagged p500": "/matches?status=flagged&page=500",
                "notice": f"/reports/notice?host={top_host}",
                "takedowns": "/takedowns",
                "takedowns of one site": f"/takedowns?site={top_host}",
            }
            results: dict[str, dict[str, float]] = {}
            for label, path in pages.items():
                samples = time_page(client, base + path, args.requests)
                results[label] = {
                    "median_ms": round(statistics.median(samples), 1),
                    "p90_ms": round(percentile(samples, 90), 1),
                    "p99_ms": round(percentile(samples, 99), 1),
                }
    finally:
        if not args.keep:
            with admin_engine.connect() as connection:
                connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin_engine.dispose()

    baseline = results["healthz (baseline)"]["median_ms"]
    width = max(len(label) for label in results)
    print(f"admin latency: {int(load['matches']):,} matches, {int(load['rollup_rows']):,} roll-up rows, "
          f"gunicorn x{args.workers}, {args.requests} requests per page")  # fmt: skip
    print(f"load: pages {load['load_pages_s']:.1f} s, matches (triggers on) {load['load_matches_s']:.1f} s")
    print(f"{'page':<{width}}  {'median ms':>9}  {'p90 ms':>8}  {'p99 ms':>8}  {'x baseline':>10}")
    for label, figures in results.items():
        ratio = figures["median_ms"] / baseline if baseline else float("nan")
        print(
            f"{label:<{width}}  {figures['median_ms']:>9.1f}  {figures['p90_ms']:>8.1f}  "
            f"{figures['p99_ms']:>8.1f}  "
            f"{ratio:>10.1f}"
        )
    met = all(f["median_ms"] < TARGET_MEDIAN_MS and f["p99_ms"] < TARGET_P99_MS for f in results.values())
    print(f"target (median < {TARGET_MEDIAN_MS:.0f} ms, p99 < {TARGET_P99_MS:.0f} ms on every page): "
          + ("met" if met else "NOT met"))  # fmt: skip
    if args.keep:
        print(f"database kept: {name}")
    emit(
        {
            "benchmark": "admin_latency",
            "matches": int(load["matches"]),
            "rollup_rows": int(load["rollup_rows"]),
            "hosts": args.hosts,
            "works": args.works,
            "workers": args.workers,
            "requests_per_page": args.requests,
            "load_seconds": {k: round(v, 2) for k, v in load.items() if k.endswith("_s")},
            "pages": results,
            "baseline": "healthz (baseline)",
            "median_over_baseline": {
                k: round(v["median_ms"] / baseline, 2) if baseline else None for k, v in results.items()
            },
            "target_met": met,
        }
    )


def _top_confirmed_host(database_url: str) -> str:
    engine = create_engine(Settings(database_url=database_url).database_url)
    with engine.connect() as connection:
        host = connection.execute(text(
            "SELECT host FROM match_rollups WHERE status = 'confirmed' GROUP BY host ORDER BY sum(matches) "
            "DESC LIMIT 1"
        )).scalar_one()  # fmt: skip
    engine.dispose()
    return str(host)


if __name__ == "__main__":
    main()
