"""Distributed crawls: wall time of one crawl of a loopback site by 1, 2 and 3 processes sharing one frontier
in Redis (``fptrack crawl --distributed``), against a plain one-process crawl measured in the same run.

    python -m benchmarks.crawl.distributed --quick            # 51 pages, 2 processes
    python -m benchmarks.crawl.distributed                    # 1,281 pages, 1 / 2 / 3 processes
    python -m benchmarks.crawl.distributed --latency 0.2 --processes 1,2,4

The site (generated, no corpus): an index, sections and chapter pages of a few hundred characters, every
response held back ``--latency`` seconds by the server, as a remote site's round trip would be. Politeness per
process is ``FPTRACK_CRAWL_CONCURRENCY_PER_SITE=4`` with AutoThrottle off, so N processes may have 4 x N
requests in flight: what a distributed crawl buys is that parallelism (and, on several machines, their CPU and
bandwidth). Every mode crawls the same URLs into a fresh PostgreSQL database (``--postgres``: a server where
it may create and drop its own databases), tasks in-process (no works registered: the fingerprint stage is not
what is measured). Redis: ``--redis`` (only this run's ``fptrack:crawl:*`` keys are written; they are removed
by the crawl).

Figures: the crawl itself (the site's first request to its last, seen at the server; the speed-up is on this)
and the wall time, which adds the processes' start-up (imports, database checks: seconds on a loaded machine).

Each mode checks what the tests check: every page fetched exactly once, one crawl job with every page. Prints
a table (speed-up against the one-process plain crawl of this run) and ends with one JSON line. A service that
is not reachable: the benchmark says so and exits 0 without figures."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from typing import Any
from urllib.parse import urlsplit

from benchmarks.harness import ROOT, arguments, emit, machine, print_table, progress, require_service
from testbed.sites import Page, serve_site

PARAGRAPH = (
    "清晨的山谷里雾气很重，李青背着竹篓慢慢走上石阶，露水打湿了他的布鞋。远处传来寺庙的钟声，一声接着一声。"
)


def build_site(sections: int, chapters: int, latency: float) -> dict[str, Page]:
    pages = {"/": Page.html("".join(f'<a href="/s/{s}/">卷{s}</a> ' for s in range(sections)), delay=latency)}
    for s in range(sections):
        links = "".join(f'<a href="/c/{s}-{c}.html">第{c}章</a> ' for c in range(chapters))
        pages[f"/s/{s}/"] = Page.html(f"<h1>卷{s}</h1>{links}<a href='/'>目录</a>", delay=latency)
        for c in range(chapters):
            body = "".join(f"<p>{PARAGRAPH}（{s}-{c}-{n}）</p>" for n in range(4))
            nav = (
                f'<a href="/">目录</a> <a href="/s/{s}/">卷</a> '
                f'<a href="/c/{s}-{(c + 1) % chapters}.html">下一章</a>'
            )
            pages[f"/c/{s}-{c}.html"] = Page.html(
                f"<title>第{c}章</title><h1>第{c}章</h1>{body}{nav}", delay=latency
            )
    return pages


class Databases:
    """Fresh PostgreSQL databases of this run, dropped at the end."""

    def __init__(self, server_url: str) -> None:
        from sqlalchemy import create_engine

        from fptrack.core.settings import Settings

        self.server_url = server_url
        self.admin = create_engine(
            Settings(database_url=server_url).database_url, isolation_level="AUTOCOMMIT"
        )
        self.created: list[str] = []

    def create(self) -> str:
        from sqlalchemy import text

        name = f"fptrack_bench_dist_{os.getpid()}_{uuid.uuid4().hex[:6]}"
        with self.admin.connect() as connection:
            connection.execute(text(f'CREATE DATABASE "{name}"'))
        self.created.append(name)
        return urlsplit(self.server_url)._replace(path="/" + name).geturl()

    def drop_all(self) -> None:
        from sqlalchemy import text

        with self.admin.connect() as connection:
            for name in self.created:
                connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        self.admin.dispose()


def job_counts(database_url: str) -> tuple[int, int, int, str]:
    """(jobs, pages_seen of the last job, pages stored in the database, last job's status)."""
    from sqlalchemy import func, select
    from sqlalchemy.orm import Session

    from fptrack.core.settings import Settings
    from fptrack.storage.db import create_engine_for
    from fptrack.storage.models import CrawlJob
    from fptrack.storage.models import Page as PageRow

    engine = create_engine_for(Settings(database_url=database_url))
    try:
        with Session(engine) as session:
            jobs = list(session.scalars(select(CrawlJob).order_by(CrawlJob.id)))
            stored = session.scalar(select(func.count(PageRow.id))) or 0
            last = jobs[-1]
            return len(jobs), int(last.pages_seen), int(stored), str(last.status)
    finally:
        engine.dispose()


def run_mode(
    processes: int, distributed: bool, base: Any, env: dict[str, str], max_pages: int
) -> tuple[float, float]:
    """(wall seconds from the processes' start to the last one's exit, seconds from the first request the site
    got to the last: the crawl itself, without the start-up of the processes, which on a loaded machine is
    long)."""
    command = [
        sys.executable,
        "-m",
        "fptrack.cli",
        "crawl",
        base + "/",
        "--depth",
        "3",
        "--max-pages",
        str(max_pages),
        "--allow-private-host",
        base.key,
        "-q",
    ]
    if distributed:
        command.append("--distributed")
    started = time.monotonic()
    seen: list[float] = []
    done = threading.Event()

    def watch() -> None:
        count = len(base.requests)
        while not done.is_set():
            now = len(base.requests)
            if now != count:
                seen.append(time.monotonic())
                count = now
            time.sleep(0.02)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    children = [
        subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(processes)
    ]
    for child in children:
        out, err = child.communicate(timeout=1800)
        if child.returncode != 0:
            raise SystemExit(f"crawl process failed ({child.returncode}):\n{out}\n{err}")
    wall = time.monotonic() - started
    done.set()
    watcher.join()
    return wall, (seen[-1] - seen[0]) if len(seen) > 1 else 0.0


def main() -> None:
    parser = arguments(__doc__, "51 pages, 0.05 s a response; 2 processes")
    parser.add_argument(
        "--sections", type=int, default=40, help="sections of the site (x chapters + 1 pages)"
    )
    parser.add_argument("--chapters", type=int, default=31, help="chapters per section")
    parser.add_argument("--latency", type=float, default=0.1, help="seconds the server holds each response")
    parser.add_argument("--processes", default="1,2,3", help="distributed modes: processes per crawl")
    parser.add_argument(
        "--postgres",
        default=os.environ.get("FPTRACK_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"),
    )
    parser.add_argument(
        "--redis", default=os.environ.get("FPTRACK_CRAWL_REDIS_URL", "redis://127.0.0.1:6379/15")
    )
    args = parser.parse_args()
    if args.quick:
        args.sections, args.chapters, args.processes, args.latency = 5, 9, "2", 0.05
    counts = [int(n) for n in args.processes.split(",") if n.strip()]
    require_service("distributed_crawl", "PostgreSQL", args.postgres, 5432)
    require_service("distributed_crawl", "Redis", args.redis, 6379)

    pages = build_site(args.sections, args.chapters, args.latency)
    total = len(pages)
    databases = Databases(args.postgres)
    results: list[dict[str, Any]] = []
    try:
        with serve_site(pages) as base:
            modes = [(1, False)] + [(n, True) for n in counts]
            for processes, distributed in modes:
                name = (
                    f"{processes} process{'es' if processes > 1 else ''}"
                    f"{' --distributed' if distributed else ''}"
                )
                database_url = databases.create()
                env = {k: v for k, v in os.environ.items() if not k.startswith("FPTRACK_")}
                # our own loopback site: the polite pace (FPTRACK_SITE_RATE) is not what is measured
                env["FPTRACK_SITE_RATE"] = "1000"
                env.update(FPTRACK_DATABASE_URL=database_url, FPTRACK_CRAWL_REDIS_URL=args.redis,
                           FPTRACK_CRAWL_AUTOTHROTTLE="false", FPTRACK_CRAWL_CONCURRENCY_PER_SITE="4",
                           FPTRACK_DATA_DIR=str(ROOT / "fptrack-data"))  # fmt: skip
                init = subprocess.run([sys.executable, "-m", "fptrack.cli", "init"], cwd=ROOT, env=env,
                                      capture_output=True, text=True, check=False)  # fmt: skip
                if init.returncode != 0:
                    raise SystemExit(f"fptrack init failed: {init.stderr}")
                before = len(base.page_requests)
                progress(f"{name}: crawling {total} pages")
                seconds, fetching = run_mode(processes, distributed, base, env, max_pages=total * 2)
                fetched = Counter(base.page_requests[before:])
                jobs, seen, stored, status = job_counts(database_url)
                ok = set(fetched) == set(pages) and set(fetched.values()) == {1} and (jobs, seen, stored) == (
                    1, total, total) and status == "finished"  # fmt: skip
                results.append(
                    {
                        "mode": name,
                        "processes": processes,
                        "distributed": distributed,
                        "seconds": round(seconds, 2),
                        "fetch_seconds": round(fetching, 2),
                        "pages": seen,
                        "pages_per_second": round(seen / fetching, 1) if fetching else 0.0,
                        "fetched_once": ok,
                    }
                )
    finally:
        databases.drop_all()

    info = machine()
    baseline = results[0]["fetch_seconds"]
    for result in results:
        result["speedup"] = round(baseline / result["fetch_seconds"], 2) if result["fetch_seconds"] else 0.0
    print(
        f"distributed crawl: {total} pages, server latency {args.latency:g}s per response, 4 requests in "
        "flight per "
        f"process; {info['machine']}, {info['cores']} cores, Python {info['python']}"
    )
    print_table(
        "one crawl, fresh PostgreSQL database per mode: fetching = the site's first request to its last; "
        "wall = the processes' start to the last one's exit",
        ["mode", "fetching s", "pages/s", "speed-up vs 1 process", "wall s", "every URL once, one job"],
        [[r["mode"], f"{r['fetch_seconds']:.1f}", f"{r['pages_per_second']:.1f}", f"{r['speedup']:.2f}",
          f"{r['seconds']:.1f}", "yes" if r["fetched_once"] else "NO"] for r in results],
    )  # fmt: skip
    emit(
        {
            "benchmark": "distributed_crawl",
            "pages": total,
            "latency": args.latency,
            "results": results,
            "speedup_best": max(r["speedup"] for r in results[1:]),
        }
    )
    if not all(r["fetched_once"] for r in results):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
