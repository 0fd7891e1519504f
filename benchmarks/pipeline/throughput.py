"""The production pipeline end to end: pages per second of ``fptrack crawl`` on a generated pirate site, in
four run modes, with the same matches in every mode; CPU per page per stage; registering a 1M-character work;
compare time as the registry grows.

    python -m benchmarks.pipeline.throughput            # 5,000 pages, 1,000 chapters, all four modes
    python -m benchmarks.pipeline.throughput --quick    # 40 pages, 20 chapters, SQLite: a smoke run
    python -m benchmarks.pipeline.throughput --pages 300 --registry 100 --modes sqlite,postgres,postgres-w2 \
        --stage-sample 50 --scale-sizes 100,1000 --scale-sample 30      # a minute at the targets' speeds
    python -m benchmarks.pipeline.throughput --pages 1000 --modes sqlite,postgres-w2 --scale-sizes 100,1000

Needs ``../shared/corpus`` (``FPTRACK_CORPUS``); PostgreSQL (``--postgres``, a server where it may create its
own database) and Redis (``--redis``) for the modes that use them: a service that is not reachable skips its
modes.

1. **The site** (``benchmarks/pipeline_site.py``): ``--pages`` chapter pages of about 5,000 characters, half
   of them verbatim or edited copies of registered chapters, half unrelated text (an unregistered novel, news,
   synthesised text), behind index pages, every page in the same site template (navigation bar, footer). It is
   served by a ``ThreadingHTTPServer`` on 127.0.0.1 (``testbed/sites.py``) in a thread of this process,
   on one port for the whole run, so every mode crawls the same URLs. The registry: ``--registry`` chapters
   (corpus chapters of 西游记 and 三国演义, then chapters synthesised from their clauses) in works of 200
   chapters.
2. **Modes**, each on a fresh database: ``sqlite`` (embedded default, tasks in-process), ``postgres`` (tasks
   in-process), ``postgres-w1`` and ``postgres-w2`` (tasks on 1 or 2 ``fptrack worker -c 1`` processes over
   Redis, ``--redis`` with a queue of this run's own). In each: ``fptrack init``, ``fptrack works add FILE
   --title T`` per work (timed apart; always in-process, so the registry is complete when the crawl starts:
   with a broker ``works add`` returns before the workers have indexed the work), then the timed ``fptrack
   crawl URL --depth 2 --max-pages N -q``: wall time until the command returns (fetched, stored,
   fingerprinted, compared, committed, workers waited for). Then ``fptrack matches --format json``.
   PostgreSQL's planner statistics come from autovacuum; on a server where it is off (the output says so) a
   fresh database has none, and ``--analyze`` runs ``ANALYZE`` after registering (untimed) to see the figures
   a server with autovacuum would give.
   **Bare Scrapy**, the physical limit the modes are read against: a plain ``scrapy.Spider`` run by
   ``CrawlerProcess`` in a subprocess of its own (``--bare-spider``), on the same site in the same run, with
   the crawl's concurrency (``FPTRACK_CRAWL_CONCURRENCY`` requests, all on the one site, AutoThrottle off,
   robots.txt obeyed, depth 2, the same page limit). It fetches every page, decodes it, parses it (every text
   node and every link, lxml through Scrapy's selectors), follows the links and keeps nothing. Wall time of
   the subprocess, start-up included, as for ``fptrack crawl``. Each mode's pages/s is also given as a ratio
   to it (targets: >= 0.85 embedded, >= 0.75 PostgreSQL + 2 workers). ``--rounds N`` runs the bare spider
   and every mode N times, alternating, and reports each mode's ratio round by round and its median (the
   target's figure): on a shared machine the CPU's speed drifts by 10-20 % from one minute to the next, which
   moves a CPU-bound crawl and not the latency-bound bare spider. Each crawl's wall (the bare spider's
   too) is split in three from the site's request log: ``start`` (to its first request), ``fetch`` (first to
   last request) and ``after`` (last request to the process's end). The site's server answers a kept-alive
   request ~44 ms late (``http.server`` sends the headers and the body apart, and the body waits for the
   client's delayed ACK), so with 8 requests in flight fetching is bound by that latency, as on a real site,
   and not by the bare spider's CPU.
   **CPU per page**, beside the bare spider's in the same round: CPU seconds of every process of the crawl
   over its pages (target: at most 2x the bare spider's): the ``fptrack crawl`` process and its children
   (the compare pool: ``getrusage`` of waited-for children), the worker processes (``/proc/PID/stat`` of
   their trees, before and after) and the PostgreSQL backends connected to the mode's database (sampled from
   ``/proc`` every 0.2 s while the crawl runs: they end with their connections; the last 0.2 s of a backend
   may be missed). The site's server, in this process, is counted for neither.
3. **Parity**: the set of (page_url, work_id, chapter_index) of every mode against the first, and each against
   the ground truth (the copies the generator made), with the misses per kind of copy.
4. **CPU per page per stage**, in this process (``time.process_time``) on a sample of the pages: decode +
   main-text extraction, analysis (``fingerprint.text_fingerprints.fingerprint_text`` under the contract:
   normalise, pinyin initials, the two winnowings), compare with the registry of
   the SQLite mode (two passes: the first fills the per-process cache of analysed chapters, as a long crawl
   does).
5. **Registering a 1,000,000-character work** (200 chapters 第N章, synthesised from corpus clauses) with
   ``fptrack works add`` on a fresh SQLite and a fresh PostgreSQL database, as a timed subprocess.
6. **Compare time as the registry grows**: 100, 1,000 and 10,000 synthesised chapters registered in-process on
   SQLite (``register_work`` + ``index_work``, commit per work of 100 chapters); median time of
   ``compare_document`` over a sample of copies and unrelated pages, at each size (second of two passes).
   ``--scale-budget`` caps the registering time (what was reached is measured and said).

Synthesised text: corpus clauses (cut at punctuation) in shuffled order; past the size of the corpus, each
further pass over the clauses re-letters the Han characters within bands of similar frequency, so synthesised
chapters do not repeat each other verbatim (``ClauseStream`` in ``pipeline_site.py``).

Prints a table per section (targets beside the figures: ratio >= 1.00 meets the target) and the machine, and
ends with one JSON line. Progress goes to stderr. Temporary data lives in a ``tempfile.mkdtemp()`` folder,
deleted at the end with the PostgreSQL databases this run created (``--keep`` keeps both).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.corpus import CORPUS, require_corpus
from benchmarks.harness import (
    ROOT,
    BackendCpu,
    arguments,
    children_cpu_seconds,
    machine,
    print_table,
    progress,
    ratio,
    tree_cpu_seconds,
)
from benchmarks.pipeline_site import (
    COPY_KINDS,
    UNRELATED_KINDS,
    ClauseStream,
    PipelineSite,
    TextPools,
    build_site,
    corpus_pools,
    synthetic_work,
)
from benchmarks.pirate_web import paragraphs_of, random_edits
from testbed.sites import SiteURL, serve_site

MODES = {  # name: (label, backend, workers)
    "sqlite": ("SQLite in-process", "sqlite", 0),
    "postgres": ("PostgreSQL in-process", "postgresql", 0),
    "postgres-w1": ("PostgreSQL + 1 worker", "postgresql", 1),
    "postgres-w2": ("PostgreSQL + 2 workers", "postgresql", 2),
}
QUICK_MODES = ("sqlite",)
TARGET_PAGES_PER_SECOND = {"sqlite": 50.0, "postgres-w2": 100.0}
TARGET_REGISTER_SECONDS = {"postgresql": 5.0}
TARGET_BARE_RATIO = {"sqlite": 0.85, "postgres-w2": 0.75}  # pages/s of the mode over bare Scrapy's
TARGET_COMPARE_GROWTH = 2.0  # per-page compare time, largest registry / 100 chapters
TARGET_CPU_OVER_BARE = 2.0  # CPU per page of a mode's crawl (every process) over the bare spider's
WORKER_TASK_DONE = re.compile(r"Task fptrack\.(?:process_pages|fingerprint_page)\[[^\]]+\] succeeded")
CRAWL_LINE = re.compile(r"crawled (\d+) page\(s\) in [\d.]+s \((.*)\); (\d+) with text[^;]*; (\d+) failed")


# ---------------------------------------------------------------------------------------------- PIPELINE API
# Every in-process call of the pipeline's API is in this section (the rest drives the `fptrack` command line).
# The API is being reworked: when names change, this is the one place to adjust.


def pipeline_sessions(database_url: str, data_dir: Path, *, migrate_schema: bool = False) -> tuple[Any, Any]:
    """(settings, sessionmaker) for a database; ``migrate_schema`` creates the schema first."""
    from fptrack.core.settings import Settings
    from fptrack.storage.db import create_engine_for, migrate, session_factory

    settings = Settings(data_dir=data_dir, database_url=database_url)
    engine = create_engine_for(settings)
    if migrate_schema:
        migrate(settings, engine)
    return settings, session_factory(engine)


def stage_extract(url: str, body: bytes, content_type: str) -> str:
    """HTML decode + main-text extraction of one response, as the crawl's first pipeline does."""
    from datetime import UTC, datetime

    from scrapy.http import HtmlResponse

    from fptrack.crawler.parse import parse_response

    response = HtmlResponse(url=url, body=body, headers={"Content-Type": content_type})
    return str(parse_response(response, requested_url=url, fetched_at=datetime.now(UTC)).page.text)


def stage_analyse(text: str) -> Any:
    """Normalise and fingerprint a text under the contract (the two winnowings): the compare stage's
    document."""
    from fptrack.fingerprint.text_fingerprints import fingerprint_text

    return fingerprint_text(text)


def stage_compare(session: Any, document: Any, settings: Any) -> list[Any]:
    """Candidates from the indexes, verification and verdicts against every registered chapter."""
    from fptrack.compare.service import compare_document

    return list(compare_document(session, document, settings))


def verdict_key(verdict: Any) -> tuple[str, int] | None:
    """(work title, chapter index) of a flagged verdict, else ``None``."""
    return (str(verdict.work_title), int(verdict.chapter_index)) if verdict.flagged else None


def register_in_process(session: Any, text: str, title: str, settings: Any) -> int:
    """Register a work and index its chapters in the caller's session (the caller commits)."""
    from fptrack.compare.service import index_work
    from fptrack.compare.works import register_work

    registered = register_work(session, text.encode("utf-8"), source_name=f"{title}.txt", title=title)
    index_work(session, registered.work_id, settings)
    return int(registered.chapters)


# ------------------------------------------------------------------------------------------------ services


@dataclass
class Services:
    postgres_url: str
    redis_url: str
    postgres_version: str = ""
    postgres_autovacuum: str = ""
    postgres_problem: str = ""
    redis_problem: str = ""
    created: list[str] = field(default_factory=list)  # databases this run created (and will drop)

    def probe(self) -> None:
        try:
            import psycopg

            with psycopg.connect(self._dsn(), autocommit=True, connect_timeout=5) as connection:
                row = connection.execute("SHOW server_version").fetchone()
                self.postgres_version = str(row[0]) if row else "?"
                row = connection.execute("SHOW autovacuum").fetchone()
                self.postgres_autovacuum = str(row[0]) if row else "?"
        except Exception as error:  # noqa: BLE001 - any failure means: skip the PostgreSQL modes, say why
            self.postgres_problem = (
                f"PostgreSQL at {self.postgres_url} not reachable ({type(error).__name__}: {error})"
            )
        try:
            import redis

            redis.Redis.from_url(self.redis_url, socket_connect_timeout=3).ping()
        except Exception as error:  # noqa: BLE001 - same for Redis
            self.redis_problem = f"Redis at {self.redis_url} not reachable ({type(error).__name__}: {error})"

    def _dsn(self) -> str:
        from sqlalchemy.engine import make_url

        return make_url(self.postgres_url).set(drivername="postgresql").render_as_string(hide_password=False)

    def fresh_database(self, label: str) -> str:
        """Create a database of this run's own; returns its URL."""
        import psycopg
        from sqlalchemy.engine import make_url

        name = f"fptrack_bench_{os.getpid()}_{label.replace('-', '_')}"
        with psycopg.connect(self._dsn(), autocommit=True) as connection:
            exists = connection.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
            if exists:
                raise SystemExit(f"database {name} already exists: not ours to reuse or drop")
            connection.execute(f'CREATE DATABASE "{name}"')
        self.created.append(name)
        return make_url(self.postgres_url).set(database=name).render_as_string(hide_password=False)

    def analyze(self, database_url: str) -> None:
        """``ANALYZE`` one of this run's databases (what autovacuum does on its own when it is on)."""
        import psycopg
        from sqlalchemy.engine import make_url

        dsn = make_url(database_url).set(drivername="postgresql").render_as_string(hide_password=False)
        with psycopg.connect(dsn, autocommit=True) as connection:
            connection.execute("ANALYZE")

    def drop_created(self) -> None:
        if not self.created:
            return
        import psycopg

        with psycopg.connect(self._dsn(), autocommit=True) as connection:
            for name in self.created:
                connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        self.created.clear()

    def forget_queue(self, queue: str) -> None:
        """Remove this run's queue and its binding from Redis (their names are this run's own); task results
        expire by themselves (``result_expires``)."""
        try:
            import redis

            client = redis.Redis.from_url(self.redis_url, socket_connect_timeout=3)
            # kombu 5.x names the binding set ``_kombu.binding_permanent.<queue>``, older ones
            # ``_kombu.binding.``
            client.delete(queue, f"_kombu.binding.{queue}", f"_kombu.binding_permanent.{queue}")
        except Exception as error:  # noqa: BLE001 - cleaning up is best effort
            progress(f"could not remove queue {queue} from Redis: {error}")


def base_env(data_dir: Path, database_url: str, concurrency: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FPTRACK_")}
    # the site is our own loopback server: the polite pace (FPTRACK_SITE_RATE) is not what is measured
    env["FPTRACK_SITE_RATE"] = "1000"
    env.update(
        FPTRACK_DATA_DIR=str(data_dir),
        FPTRACK_DATABASE_URL=database_url,
        FPTRACK_CRAWL_CONCURRENCY=str(concurrency),
        # a page waits while the in-process stage runs before it: keep slow modes from timing out requests
        FPTRACK_CRAWL_TIMEOUT="180",
        # the site is on loopback, which the guard refuses by default
        FPTRACK_ALLOW_PRIVATE_HOSTS="127.0.0.1",
        # the pipeline's throughput, not politeness: the one site may take every request at once, unthrottled
        FPTRACK_CRAWL_CONCURRENCY_PER_SITE=str(concurrency),
        FPTRACK_CRAWL_AUTOTHROTTLE="false",
    )
    return env


def fptrack(
    env: dict[str, str], *args: str, timeout: float = 3600
) -> tuple[subprocess.CompletedProcess[str], float]:
    """Run ``fptrack ARGS`` (``python -m fptrack.cli``): (the completed process, wall seconds); raises on
    failure."""
    started = time.perf_counter()
    completed = subprocess.run(
        [sys.executable, "-m", "fptrack.cli", *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    elapsed = time.perf_counter() - started
    if completed.returncode != 0:
        raise RuntimeError(
            f"fptrack {' '.join(args)} failed ({completed.returncode}):\n{completed.stderr[-3000:]}"
        )
    return completed, elapsed


@contextmanager
def workers(env: dict[str, str], count: int, log_dir: Path) -> Iterator[list[subprocess.Popen[bytes]]]:
    """``count`` ``fptrack worker -c 1`` processes, ready before the block runs, stopped after it."""
    started: list[subprocess.Popen[bytes]] = []
    logs = []
    try:
        for number in range(count):
            log_path = log_dir / f"worker-{number}.log"
            log = log_path.open("wb")
            logs.append((log, log_path))
            started.append(
                subprocess.Popen(
                    [sys.executable, "-m", "fptrack.cli", "worker", "-c", "1", "--loglevel", "INFO"],
                    env=env,
                    cwd=ROOT,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # its own process group: stopped as a whole below
                )
            )
        deadline = time.monotonic() + 120
        # a worker starts a companion for the meaning queue (cli/processes.py) unless the path is off; both
        # print " ready." to this log, and a deployment's are running before any crawl: wait for both
        from fptrack.core.settings import Settings

        expected = 2 if Settings.from_env(env).meaning else 1
        for process, (_, log_path) in zip(started, logs, strict=True):
            while log_path.read_text(errors="replace").count(" ready.") < expected:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        f"worker did not start:\n{log_path.read_text(errors='replace')[-3000:]}"
                    )
                time.sleep(0.2)
        yield started
    finally:
        for process in started:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)  # warm shutdown
        for process in started:
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)
        for log, _ in logs:
            log.close()


# ----------------------------------------------------------------------------------------------- bare Scrapy


def bare_spider_main(url: str, depth: int, max_pages: int, concurrency: int) -> None:
    """The body of the ``--bare-spider`` subprocess: crawl ``url`` with a plain Scrapy spider that fetches,
    decodes and parses every page and follows its links, keeping nothing; print one JSON line of counts."""
    import scrapy
    from scrapy.crawler import CrawlerProcess

    counts: Counter[str] = Counter()
    statuses: Counter[int] = Counter()

    class BareSpider(scrapy.Spider):
        name = "bare"

        async def start(self) -> AsyncIterator[Any]:
            # filtered like every other request (Scrapy's default start requests are not): a link back to the
            # start page is not fetched twice, as it is not by ``fptrack crawl``
            yield scrapy.Request(url, callback=self.parse)

        def parse(self, response: Any) -> Iterator[Any]:
            statuses[response.status] += 1
            counts["pages"] += 1
            counts["text_nodes"] += len(response.xpath("//body//text()").getall())
            links = response.css("a::attr(href)").getall()
            counts["links"] += len(links)
            yield from response.follow_all(links, callback=self.parse)

    process = CrawlerProcess(
        {
            "LOG_LEVEL": "WARNING",
            "TELNETCONSOLE_ENABLED": False,
            "ROBOTSTXT_OBEY": True,
            "DEPTH_LIMIT": depth,
            "CLOSESPIDER_PAGECOUNT": max_pages,
            "CONCURRENT_REQUESTS": concurrency,
            "CONCURRENT_REQUESTS_PER_DOMAIN": concurrency,
            "AUTOTHROTTLE_ENABLED": False,
            "DOWNLOAD_DELAY": 0,
            "COOKIES_ENABLED": False,
        }
    )
    process.crawl(BareSpider)
    process.start()
    print(json.dumps({"pages": 0, **counts, "statuses": dict(statuses)}))


def run_bare_scrapy(site: PipelineSite, base: str, concurrency: int) -> dict[str, Any]:
    """Wall seconds and pages of the bare spider on the site, as a subprocess (start-up included)."""
    progress(f"bare Scrapy: crawling {len(site.pages)} pages")
    first_request = len(base.request_times) if isinstance(base, SiteURL) else 0
    started, since, cpu = time.perf_counter(), time.monotonic(), children_cpu_seconds()
    completed = subprocess.run(
        [sys.executable, "-m", "benchmarks.pipeline.throughput", "--bare-spider", base + "/", "--bare-depth",
         str(site.depth), "--bare-max-pages", str(len(site.pages) + 10), "--concurrency", str(concurrency)],
        cwd=ROOT, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    wall, cpu = time.perf_counter() - started, children_cpu_seconds() - cpu
    if completed.returncode != 0:
        raise RuntimeError(
            f"the bare Scrapy spider failed ({completed.returncode}):\n{completed.stderr[-3000:]}"
        )
    counts = json.loads(completed.stdout.strip().splitlines()[-1])
    pages = int(counts["pages"])
    progress(f"bare Scrapy: {pages} pages in {wall:.1f}s ({pages / wall:.2f} pages/s)")
    return {
        **counts,
        "seconds": round(wall, 2),
        "pages_per_second": round(pages / wall, 3) if wall else 0.0,
        "cpu_seconds": round(cpu, 2),
        "cpu_ms_per_page": round(1000 * cpu / pages, 2) if pages else None,
        "phases": phases(base, first_request, since, time.monotonic()),
    }


def phases(base: str, first_request: int, started: float, ended: float) -> dict[str, float]:
    """Where a run's wall went, read from the site's request log (``time.monotonic()`` of each request):
    ``start`` from the process's start to its first request, ``fetch`` from its first request to its last,
    ``after`` from its last request to the process's end."""
    times = base.request_times[first_request:] if isinstance(base, SiteURL) else []
    if not times:
        return {}
    return {
        "start": round(times[0] - started, 2),
        "fetch": round(times[-1] - times[0], 2),
        "after": round(ended - times[-1], 2),
    }


# ------------------------------------------------------------------------------------------------ modes


@dataclass
class ModeResult:
    mode: str
    register_seconds: float = 0.0
    crawl_seconds: float = 0.0
    pages_crawled: int = 0
    pages_with_text: int = 0
    statuses: str = ""
    failed: int = 0
    matches: set[tuple[str, int, int]] = field(default_factory=set)  # (page_url, work_id, chapter_index)
    titled: set[tuple[str, str, int]] = field(default_factory=set)  # (path, work_title, chapter_index)
    database_url: str = ""
    skipped: str = ""
    worker_tasks: list[int] = field(default_factory=list)  # fingerprint tasks each worker finished
    phases: dict[str, float] = field(default_factory=dict)  # start, fetch, after: see phases()
    cpu: dict[str, float] = field(default_factory=dict)  # CPU seconds of the crawl: crawl, workers, postgres

    @property
    def pages_per_second(self) -> float:
        return self.pages_crawled / self.crawl_seconds if self.crawl_seconds else 0.0

    @property
    def cpu_ms_per_page(self) -> float | None:
        return 1000 * sum(self.cpu.values()) / self.pages_crawled if self.cpu and self.pages_crawled else None


def run_mode(
    mode: str,
    site: PipelineSite,
    base: str,
    workdir: Path,
    services: Services,
    args: argparse.Namespace,
    work_files: list[tuple[str, Path]],
    round_number: int = 0,
) -> ModeResult:
    _, backend, worker_count = MODES[mode]
    result = ModeResult(mode)
    if backend == "postgresql" and services.postgres_problem:
        result.skipped = services.postgres_problem
        return result
    if worker_count and services.redis_problem:
        result.skipped = services.redis_problem
        return result
    label = mode if round_number == 0 else f"{mode}-round{round_number + 1}"
    data_dir = workdir / label
    data_dir.mkdir()
    database_url = (
        services.fresh_database(label) if backend == "postgresql" else f"sqlite:///{data_dir / 'fptrack.db'}"
    )
    result.database_url = database_url
    env = base_env(data_dir, database_url, args.concurrency)
    fptrack(env, "init")
    progress(f"{mode}: registering {len(site.chapters)} chapters in {len(work_files)} works")
    for title, path in work_files:
        _, seconds = fptrack(env, "works", "add", str(path), "--title", title)
        result.register_seconds += seconds
    if backend == "postgresql" and args.analyze:
        # untimed: planner statistics of the registry, as autovacuum would make them
        services.analyze(database_url)

    max_pages = len(site.pages) + 10
    crawl_args = ("crawl", base + "/", "--depth", str(site.depth), "--max-pages", str(max_pages), "-q")
    timeout = 600 + 20 * len(site.pages)
    progress(f"{mode}: crawling {len(site.pages)} pages")
    first_request = len(base.request_times) if isinstance(base, SiteURL) else 0
    from sqlalchemy.engine import make_url

    backends = BackendCpu(make_url(database_url).database or "") if backend == "postgresql" else None
    if worker_count:
        queue = f"fptrack_bench_{os.getpid()}"
        env.update(FPTRACK_BROKER_URL=args.redis, FPTRACK_TASK_QUEUE=queue)
        try:
            with workers(env, worker_count, data_dir) as processes:
                pids = [process.pid for process in processes]
                before = children_cpu_seconds(), tree_cpu_seconds(*pids)
                with backends or contextlib.nullcontext():
                    crawl, result.crawl_seconds = fptrack(env, *crawl_args, timeout=timeout)
                ended = time.monotonic()  # the crawl's own wall: the workers' start and stop are not in it
                result.cpu = {
                    "crawl": children_cpu_seconds() - before[0],
                    "workers": tree_cpu_seconds(*pids) - before[1],
                }
        finally:
            for name in (
                queue,
                f"{queue}.crawls",
            ):  # the product's crawl-job queue is named after the task queue
                services.forget_queue(name)
        result.worker_tasks = [
            len(WORKER_TASK_DONE.findall(log.read_text(errors="replace")))
            for log in sorted(data_dir.glob("worker-*.log"))
        ]
        env.pop("FPTRACK_BROKER_URL")
    else:
        before_crawl = children_cpu_seconds()
        with backends or contextlib.nullcontext():
            crawl, result.crawl_seconds = fptrack(env, *crawl_args, timeout=timeout)
        ended = time.monotonic()
        result.cpu = {"crawl": children_cpu_seconds() - before_crawl}
    if backends is not None:
        result.cpu["postgres"] = backends.seconds
    result.phases = phases(base, first_request, ended - result.crawl_seconds, ended)
    summary = CRAWL_LINE.search(crawl.stdout)
    if summary is None:
        raise RuntimeError(f"no summary line in the crawl's output:\n{crawl.stdout[-2000:]}")
    result.pages_crawled, result.statuses = int(summary.group(1)), summary.group(2)
    result.pages_with_text, result.failed = int(summary.group(3)), int(summary.group(4))

    listing, _ = fptrack(env, "matches", "--format", "json")
    for line in listing.stdout.splitlines():
        if line.strip():
            match = json.loads(line)
            result.matches.add((match["page_url"], int(match["work_id"]), int(match["chapter_index"])))
            path = match["page_url"].removeprefix(base)
            result.titled.add((path, match["work_title"], int(match["chapter_index"])))
    progress(
        f"{mode}: {result.pages_crawled} pages in {result.crawl_seconds:.1f}s "
        f"({result.pages_per_second:.2f} pages/s), {len(result.matches)} matches, "
        f"{result.cpu_ms_per_page or 0:.1f} ms of CPU a page"
    )
    return result


def _phase_cells(figures: dict[str, float]) -> list[str]:
    return [f"{figures[k]:.2f}" if k in figures else "" for k in ("start", "fetch", "after")]


def parity_report(site: PipelineSite, results: list[ModeResult]) -> dict[str, Any]:
    """Matches of every mode against the first mode's and against the ground truth."""
    ran = [r for r in results if not r.skipped]
    expected = site.expected_copies()
    kind_of = {p.path: p.kind for p in site.chapter_pages}
    report: dict[str, Any] = {"expected_copies": len(expected), "modes": {}}
    if not ran:
        return report
    reference = ran[0]
    for r in ran:
        found = r.titled & expected
        missed = expected - r.titled
        extra = r.titled - expected
        report["modes"][r.mode] = {
            "matches": len(r.matches),
            "copies_found": len(found),
            "copies_missed": len(missed),
            "extra_matches": len(extra),
            "missed_by_kind": dict(sorted(Counter(kind_of.get(p, "?") for p, _, _ in missed).items())),
            "extra_by_kind": dict(sorted(Counter(kind_of.get(p, "?") for p, _, _ in extra).items())),
            "only_here_vs_reference": len(r.matches - reference.matches),
            "missing_here_vs_reference": len(reference.matches - r.matches),
            "examples_missing_vs_reference": sorted(reference.matches - r.matches)[:3],
            "examples_only_here": sorted(r.matches - reference.matches)[:3],
        }
    report["reference"] = reference.mode
    report["agree"] = all(r.matches == reference.matches for r in ran)
    return report


# ------------------------------------------------------------------------------------------------ stages


def stage_cpu(
    site: PipelineSite, base: str, database_url: str, data_dir: Path, sample: int, seed: int
) -> dict[str, Any]:
    """CPU milliseconds per page of each stage, on a sample of the site's chapter pages (module docstring)."""
    rng = random.Random(seed)
    copies = [p for p in site.chapter_pages if p.truth is not None]
    unrelated = [p for p in site.chapter_pages if p.truth is None]
    chosen = rng.sample(copies, min(sample // 2, len(copies))) + rng.sample(
        unrelated, min(sample - sample // 2, len(unrelated))
    )
    settings, sessions = pipeline_sessions(database_url, data_dir)
    # one page first, untimed: imports and dictionaries load once per process, not per page
    warm_up = site.pages[unrelated[0].path if unrelated else copies[0].path]
    stage_analyse(stage_extract(base + "/", warm_up.body, warm_up.content_type or "text/html"))
    extract_ms: list[float] = []
    analyse_ms: list[float] = []
    documents = []
    for spec in chosen:
        served = site.pages[spec.path]
        t0 = time.process_time()
        text = stage_extract(base + spec.path, served.body, served.content_type or "text/html")
        t1 = time.process_time()
        document = stage_analyse(text)
        t2 = time.process_time()
        extract_ms.append((t1 - t0) * 1000)
        analyse_ms.append((t2 - t1) * 1000)
        documents.append((spec, document))
    compare_ms: list[list[float]] = [[], []]
    found = 0
    with sessions() as session:
        for attempt in range(2):
            for spec, document in documents:
                t0 = time.process_time()
                verdicts = stage_compare(session, document, settings)
                compare_ms[attempt].append((time.process_time() - t0) * 1000)
                if (
                    attempt == 1
                    and spec.truth is not None
                    and spec.truth in {verdict_key(v) for v in verdicts}
                ):
                    found += 1
        session.rollback()

    def row(values: list[float]) -> dict[str, float]:
        return {"mean": round(statistics.fmean(values), 2), "median": round(statistics.median(values), 2)}

    return {
        "pages": len(chosen),
        "copies_in_sample": sum(spec.truth is not None for spec in chosen),
        "copies_flagged_in_process": found,
        "extract": row(extract_ms),
        "analyse": row(analyse_ms),
        "compare_first_pass": row(compare_ms[0]),
        "compare": row(compare_ms[1]),
    }


# ---------------------------------------------------------------------------------------------- registration


def register_large_work(
    pools: TextPools, workdir: Path, services: Services, chars: int, backends: list[str], seed: int
) -> dict[str, Any]:
    """Seconds of ``fptrack works add`` of one work of ``chars`` characters, per backend, fresh database."""
    chapters = max(1, round(chars / 5000))
    stream = ClauseStream(pools.registered_clauses + pools.unrelated_clauses, seed=seed)
    text, _ = synthetic_work(
        stream, random.Random(seed), chapters=chapters, chapter_chars=5000, title="百万字作品"
    )
    path = workdir / "large-work.txt"
    path.write_text(text, encoding="utf-8")
    out: dict[str, Any] = {"characters": len(text), "chapters": chapters}
    for backend in backends:
        if backend == "postgresql" and services.postgres_problem:
            out[backend] = None
            continue
        data_dir = workdir / f"register-{backend}"
        data_dir.mkdir()
        url = (
            services.fresh_database("register")
            if backend == "postgresql"
            else f"sqlite:///{data_dir / 'fptrack.db'}"
        )
        env = base_env(data_dir, url, 8)
        fptrack(env, "init")
        progress(f"registering a {len(text):,}-character work on {backend}")
        _, seconds = fptrack(env, "works", "add", str(path), "--title", "百万字作品")
        out[backend] = round(seconds, 2)
    return out


# ------------------------------------------------------------------------------------------------ scaling


def compare_scaling(
    pools: TextPools, workdir: Path, sizes: list[int], sample: int, budget: float, seed: int
) -> dict[str, Any]:
    """Median compare time per page with growing registries of synthesised chapters (in-process, SQLite)."""
    per_work = 100
    rng = random.Random(seed)
    stream = ClauseStream(pools.registered_clauses + pools.unrelated_clauses, seed=seed + 10)
    unrelated = ClauseStream(
        pools.registered_clauses + pools.unrelated_clauses, seed=seed + 20, first_epoch=1
    )
    data_dir = workdir / "scaling"
    settings, sessions = pipeline_sessions(
        f"sqlite:///{data_dir / 'fptrack.db'}", data_dir, migrate_schema=True
    )

    registered = 0
    register_seconds = 0.0
    documents: list[tuple[tuple[str, int] | None, Any]] = []
    rows: list[dict[str, Any]] = []
    stopped = ""
    for size in sorted(sizes):
        while registered < size:
            if register_seconds > budget:
                stopped = (
                    f"registering stopped at {registered:,} chapters after {register_seconds:.0f}s "
                    f"(--scale-budget {budget:.0f}s); {size:,} would take about "
                    f"{register_seconds / registered * size / 60:.0f} min with the current code"
                )
                break
            title = f"规模作品{registered // per_work + 1:04d}"
            text, chapters = synthetic_work(stream, rng, chapters=per_work, chapter_chars=5000, title=title)
            t0 = time.perf_counter()
            with sessions() as session:
                register_in_process(session, text, title, settings)
                session.commit()
            register_seconds += time.perf_counter() - t0
            registered += per_work
            if not documents:  # pages: copies of the first work's chapters, and unrelated text
                for i in range(sample):
                    if i % 2 == 0:
                        chapter = chapters[(i // 2) % len(chapters)]
                        body = "\n".join([chapter.heading, *chapter.paragraphs])
                        if i % 4 == 2:
                            body = "\n".join(paragraphs_of(random_edits(body, 0.05, rng, pools.han)))
                        documents.append((chapter.key, stage_analyse(body)))
                    else:
                        documents.append((None, stage_analyse("\n".join(unrelated.paragraphs(5000, rng)))))
            if registered % 1000 == 0:
                progress(f"scaling: {registered:,} chapters registered ({register_seconds:.0f}s)")
        if rows and rows[-1]["chapters"] == registered:
            break  # the budget stopped the registry short of this size: already measured
        wall: list[list[float]] = [[], []]
        cpu: list[float] = []
        flagged = 0
        with sessions() as session:
            for attempt in range(2):  # the first pass fills the per-process chapter cache
                for truth, document in documents:
                    t0, c0 = time.perf_counter(), time.process_time()
                    verdicts = stage_compare(session, document, settings)
                    wall[attempt].append((time.perf_counter() - t0) * 1000)
                    if attempt == 1:
                        cpu.append((time.process_time() - c0) * 1000)
                        flagged += truth is not None and truth in {verdict_key(v) for v in verdicts}
            session.rollback()
        rows.append(
            {
                "chapters": registered,
                "register_seconds_cumulative": round(register_seconds, 1),
                "median_ms": round(statistics.median(wall[1]), 2),
                "median_ms_first_pass": round(statistics.median(wall[0]), 2),
                "median_cpu_ms": round(statistics.median(cpu), 2),
                "p90_ms": round(sorted(wall[1])[int(0.9 * (len(wall[1]) - 1))], 2),
                "copies_flagged": flagged,
                "copies": sum(t is not None for t, _ in documents),
                "clause_passes": stream.epochs_used,
            }
        )
        progress(f"scaling: {registered:,} chapters: median compare {rows[-1]['median_ms']} ms")
        if stopped:
            break
    return {"rows": rows, "stopped": stopped, "sample": len(documents)}


# ------------------------------------------------------------------------------------------------ printing


def ratios_by_round(
    rounds: list[tuple[dict[str, Any] | None, list[ModeResult]]],
) -> dict[str, list[float | None]]:
    """Per mode, its pages/s over the bare spider's of the same round, round by round (None: skipped)."""
    ratios: dict[str, list[float | None]] = {}
    for bare, results in rounds:
        bare_pps = float(bare["pages_per_second"]) if bare else 0.0
        for r in results:
            value = r.pages_per_second / bare_pps if bare_pps and not r.skipped else None
            ratios.setdefault(r.mode, []).append(value)
    return ratios


def cpu_ratios_by_round(
    rounds: list[tuple[dict[str, Any] | None, list[ModeResult]]],
) -> dict[str, list[float | None]]:
    """Per mode, its CPU per page over the bare spider's of the same round, round by round (None: not
    measured)."""
    ratios: dict[str, list[float | None]] = {}
    for bare, results in rounds:
        bare_cpu = float(bare.get("cpu_ms_per_page") or 0.0) if bare else 0.0
        for r in results:
            mine = r.cpu_ms_per_page
            ratios.setdefault(r.mode, []).append(mine / bare_cpu if mine and bare_cpu else None)
    return ratios


def median_of(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def compare_growth(rows: list[dict[str, Any]], row: dict[str, Any], column: str) -> float:
    """``row``'s figure in ``column`` over the smallest registry's."""
    first = float(rows[0][column])
    return float(row[column]) / first if first else 0.0


def command_line() -> argparse.ArgumentParser:
    parser = arguments(__doc__, "40 pages, 20 chapters, the SQLite mode, small sections: a smoke run")
    parser.add_argument("--pages", type=int, help="chapter pages on the site (default 5,000; quick 40)")
    parser.add_argument("--registry", type=int, help="registered chapters (default 1,000; quick 20)")
    parser.add_argument(
        "--modes",
        help=f"comma-separated, of {', '.join(MODES)} (default all; quick {','.join(QUICK_MODES)}; empty: "
        "none)",
    )
    parser.add_argument(
        "--postgres",
        default=os.environ.get("FPTRACK_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"),
        help="PostgreSQL server where this run creates (and drops) its own databases",
    )
    parser.add_argument(
        "--redis",
        default=os.environ.get("FPTRACK_BENCH_REDIS_URL", "redis://127.0.0.1:6379/14"),
        help="Redis broker of the worker modes (a queue of this run's own)",
    )
    parser.add_argument("--concurrency", type=int, default=8, help="FPTRACK_CRAWL_CONCURRENCY of the crawls")
    parser.add_argument(
        "--stage-sample", type=int, help="pages of the CPU-per-stage sample (default 200; quick 10)"
    )
    parser.add_argument(
        "--register-chars", type=int, help="size of the large work (default 1,000,000; quick 50,000; 0: skip)"
    )
    parser.add_argument(
        "--scale-sizes",
        help="registry sizes of the compare-time section (default 100,1000,10000; "
        "quick 100,200; empty: skip)",
    )
    parser.add_argument(
        "--scale-sample", type=int, help="pages compared at each registry size (default 60; quick 6)"
    )
    parser.add_argument(
        "--scale-budget", type=float, default=2400.0, help="seconds of registering in the scaling section"
    )
    parser.add_argument(
        "--analyze",
        action="store_true",
        help="ANALYZE each PostgreSQL database after registering (untimed), as autovacuum would on a server "
        "where it is on; the default measures the product as it is on this server",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="run the bare spider and every mode this many times, alternating, and report each mode's ratio "
        "to the bare spider round by round and its median (a shared machine's speed drifts by 10-20 %% "
        "from one minute to the next)",
    )
    parser.add_argument("--seed", type=int, default=9)
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder and the databases")
    parser.add_argument("--no-bare-scrapy", action="store_true", help="skip the bare Scrapy spider")
    # the bare spider's own subprocess (run_bare_scrapy)
    parser.add_argument("--bare-spider", metavar="URL", help=argparse.SUPPRESS)
    parser.add_argument("--bare-depth", type=int, default=2, help=argparse.SUPPRESS)
    parser.add_argument("--bare-max-pages", type=int, default=1000, help=argparse.SUPPRESS)
    return parser


@dataclass(frozen=True)
class Plan:
    """What one run measures: the command line's figures with the defaults of a full or a quick run."""

    pages: int
    registry: int
    modes: list[str]
    stage_sample: int
    register_chars: int
    scale_sizes: list[int]
    scale_sample: int


def plan_of(args: argparse.Namespace, parser: argparse.ArgumentParser) -> Plan:
    """The run's sizes from ``args`` (a full run's defaults, or ``--quick``'s), checked."""

    def chosen(value: Any, quick: Any, full: Any) -> Any:
        return value if value is not None else (quick if args.quick else full)

    pages = chosen(args.pages, 40, 5000)
    registry = chosen(args.registry, 20, 1000)
    modes = [
        m.strip() for m in chosen(args.modes, ",".join(QUICK_MODES), ",".join(MODES)).split(",") if m.strip()
    ]
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        parser.error(f"unknown mode(s) {', '.join(unknown)}; choose from {', '.join(MODES)}")
    stage_sample = chosen(args.stage_sample, 10, 200)
    scale_text = chosen(args.scale_sizes, "100,200", "100,1000,10000")
    scale_sample = chosen(args.scale_sample, 6, 60)
    if pages < 2 or registry < 1 or scale_sample < 2 or stage_sample < 0 or args.rounds < 1:
        parser.error(
            "need --pages >= 2, --registry >= 1, --scale-sample >= 2, --stage-sample >= 0, --rounds >= 1"
        )
    copies_per_chapter_cap = 4  # a chapter copied more often on one site would look like site boilerplate
    if math.ceil((pages // 2) / registry) > copies_per_chapter_cap:
        registry = math.ceil((pages // 2) / copies_per_chapter_cap)
        progress(
            f"registry raised to {registry} chapters so that no chapter is copied more than "
            f"{copies_per_chapter_cap} times"
        )
    return Plan(
        pages=pages,
        registry=registry,
        modes=modes,
        stage_sample=stage_sample,
        register_chars=chosen(args.register_chars, 50_000, 1_000_000),
        scale_sizes=[int(s) for s in scale_text.split(",") if s.strip()],
        scale_sample=scale_sample,
    )


Round = tuple[dict[str, Any] | None, list[ModeResult]]  # the bare spider's figures, then every mode's


@dataclass
class Measured:
    """Everything one run measured; the first round is the one reported whole."""

    rounds: list[Round]
    stages: dict[str, Any] | None = None
    large: dict[str, Any] | None = None
    scaling: dict[str, Any] | None = None

    @property
    def bare(self) -> dict[str, Any] | None:
        return self.rounds[0][0]

    @property
    def results(self) -> list[ModeResult]:
        return self.rounds[0][1]

    @property
    def sqlite_run(self) -> ModeResult | None:
        return next((r for r in self.results if r.mode == "sqlite" and not r.skipped), None)


def measure(
    plan: Plan,
    args: argparse.Namespace,
    services: Services,
    pools: TextPools,
    site: PipelineSite,
    workdir: Path,
) -> Measured:
    """The crawls (each round: the bare spider, then every mode, on the same site), the CPU per stage, the
    large work and the compare time as the registry grows."""
    work_files = []
    for title, text in site.works:
        path = workdir / f"{title}.txt"
        path.write_text(text, encoding="utf-8")
        work_files.append((title, path))
    with serve_site(site.pages) as base:
        rounds: list[Round] = []
        for round_number in range(args.rounds):
            if args.rounds > 1:
                progress(f"round {round_number + 1} of {args.rounds}")
            bare = None if args.no_bare_scrapy else run_bare_scrapy(site, base, args.concurrency)
            rounds.append(
                (
                    bare,
                    [
                        run_mode(m, site, base, workdir, services, args, work_files, round_number)
                        for m in plan.modes
                    ],
                )
            )
        measured = Measured(rounds)
        if plan.stage_sample:
            sqlite_run = measured.sqlite_run
            if sqlite_run is None:  # a registry of its own for the in-process measurements
                data_dir = workdir / "stages"
                data_dir.mkdir()
                env = base_env(data_dir, f"sqlite:///{data_dir / 'fptrack.db'}", args.concurrency)
                fptrack(env, "init")
                for title, path in work_files:
                    fptrack(env, "works", "add", str(path), "--title", title)
                stage_url, stage_dir = env["FPTRACK_DATABASE_URL"], data_dir
            else:
                stage_url, stage_dir = sqlite_run.database_url, workdir / "sqlite"
            progress(f"CPU per stage on {plan.stage_sample} pages")
            measured.stages = stage_cpu(site, base, stage_url, stage_dir, plan.stage_sample, args.seed)
    if plan.register_chars:
        measured.large = register_large_work(
            pools, workdir, services, plan.register_chars, ["sqlite", "postgresql"], args.seed
        )
    if plan.scale_sizes:
        measured.scaling = compare_scaling(
            pools, workdir, plan.scale_sizes, plan.scale_sample, args.scale_budget, args.seed
        )
    return measured


# ------------------------------------------------------------------------------------------------ printing


def print_context(
    info: dict[str, Any], services: Services, args: argparse.Namespace, site: PipelineSite, measured: Measured
) -> None:
    """The machine, the PostgreSQL server, the site, and the modes skipped or short of pages."""
    print("pipeline throughput: fptrack crawl end to end on a generated pirate site (127.0.0.1)")
    print(
        f"machine: {info.get('cpu', '?')}, {info['cores']} cores, {info.get('ram_gb', '?')} GB RAM, "
        f"Python {info['python']}, PostgreSQL {services.postgres_version or 'not reachable'}"
        + (f" (autovacuum {services.postgres_autovacuum})" if services.postgres_autovacuum else "")
    )
    if services.postgres_autovacuum == "off":
        print(
            "note: autovacuum is off on this PostgreSQL server: the benchmark's databases get no planner "
            "statistics "
            + (
                "except the ANALYZE after registering (--analyze)"
                if args.analyze
                else "unless the product makes them (--analyze: after registering)"
            )
        )
    counts = site.counts()
    copy_kinds = ", ".join(f"{k} {counts[k]}" for k in COPY_KINDS if k in counts)
    unrelated_kinds = ", ".join(f"{k} {counts[k]}" for k in UNRELATED_KINDS if k in counts)
    print(
        f"site: {counts['chapter_pages']:,} chapter pages + {counts['index_pages']} index pages "
        f"({counts['copies']:,} copies: {copy_kinds}; {counts['unrelated']:,} unrelated: {unrelated_kinds}); "
        f"registry {counts['registered_chapters']:,} chapters ({site.notes['registered_from_corpus']} from "
        f"the corpus, {site.notes['registered_synthetic']} synthesised) in {len(site.works)} works; "
        f"crawl --depth {site.depth}, FPTRACK_CRAWL_CONCURRENCY={args.concurrency}"
    )
    for r in measured.results:
        if r.skipped:
            print(f"skipped {MODES[r.mode][0]}: {r.skipped}")
        elif r.pages_crawled != len(site.pages) or r.failed:
            print(
                f"warning: {MODES[r.mode][0]} crawled {r.pages_crawled} of the {len(site.pages)} pages "
                f"served ({r.failed} failed; statuses {r.statuses})"
            )


def print_end_to_end(measured: Measured) -> None:
    bare = measured.bare
    bare_pps = float(bare["pages_per_second"]) if bare else 0.0
    rows = []
    if bare:
        rows.append(
            ["bare Scrapy (fetch + parse, keeps nothing)", "", f"{bare['seconds']:.1f}",
             *_phase_cells(bare["phases"]), bare["pages"], "", f"{bare_pps:.2f}", "", "", "1.00", "", "",
             f"{bare['cpu_ms_per_page']:.1f}" if bare.get("cpu_ms_per_page") else "", "1.00", ""]
        )  # fmt: skip
    bare_cpu = float(bare["cpu_ms_per_page"]) if bare and bare.get("cpu_ms_per_page") else 0.0
    for r in measured.results:
        if r.skipped:
            continue
        target = TARGET_PAGES_PER_SECOND.get(r.mode)
        bare_target = TARGET_BARE_RATIO.get(r.mode)
        of_bare = r.pages_per_second / bare_pps if bare_pps else None
        rows.append(
            [
                MODES[r.mode][0],
                f"{r.register_seconds:.1f}",
                f"{r.crawl_seconds:.1f}",
                *_phase_cells(r.phases),
                r.pages_crawled,
                r.failed,
                f"{r.pages_per_second:.2f}",
                f"{target:g}" if target else "",
                ratio(r.pages_per_second, target, higher_is_better=True),
                f"{of_bare:.2f}" if of_bare is not None else "",
                f">= {bare_target:g}" if bare_target else "",
                "+".join(map(str, r.worker_tasks)) or "-",
                f"{r.cpu_ms_per_page:.1f}" if r.cpu_ms_per_page else "",
                f"{r.cpu_ms_per_page / bare_cpu:.2f}" if r.cpu_ms_per_page and bare_cpu else "",
                " + ".join(f"{name} {seconds:.1f}" for name, seconds in r.cpu.items()),
            ]
        )
    print_table(
        "End to end (wall time of `fptrack crawl` until it returns, start-up included; `works add` timed "
        "apart, in-process in every mode; vs bare: pages/s over the bare Scrapy spider's, same site and run; "
        "the crawl's wall in three, from the site's log: start = to the first request, fetch = first to last "
        "request, after = from the last request to the end; cpu ms/page: every process of the crawl, "
        f"vs the bare spider's, target <= {TARGET_CPU_OVER_BARE:g}; cpu s: where it went)",
        ["mode", "register s", "crawl s", "start", "fetch", "after", "pages", "failed", "pages/s", "target",
         "ratio", "vs bare", "target", "worker tasks", "cpu ms/page", "cpu vs bare", "cpu s"],
        rows,
    )  # fmt: skip


def print_rounds(rounds: list[Round]) -> None:
    """With more than one round: each mode's ratios to the bare spider (pages/s, CPU per page), round by
    round, and their medians."""
    if len(rounds) < 2:
        return
    print_table(
        f"Ratio to the bare Scrapy spider, round by round ({len(rounds)} rounds, each the bare spider "
        "then every mode; the first is the table above)",
        ["mode", *(f"round {n + 1}" for n in range(len(rounds))), "median", "target"],
        [
            [MODES[mode][0], *(f"{v:.2f}" if v is not None else "-" for v in values),
             f"{median_of(values):.2f}" if median_of(values) is not None else "-",
             f">= {TARGET_BARE_RATIO[mode]:g}" if mode in TARGET_BARE_RATIO else ""]
            for mode, values in ratios_by_round(rounds).items()
        ],
    )  # fmt: skip
    print_table(
        "CPU per page (every process of the crawl) over the bare spider's, round by round",
        ["mode", *(f"round {n + 1}" for n in range(len(rounds))), "median", "target"],
        [
            [MODES[mode][0], *(f"{v:.2f}" if v is not None else "-" for v in values),
             f"{median_of(values):.2f}" if median_of(values) is not None else "-",
             f"<= {TARGET_CPU_OVER_BARE:g}"]
            for mode, values in cpu_ratios_by_round(rounds).items()
        ],
    )  # fmt: skip


def print_parity(parity: dict[str, Any]) -> None:
    prows = []
    for mode, p in parity["modes"].items():
        missed = ", ".join(f"{k} {v}" for k, v in p["missed_by_kind"].items()) or "-"
        prows.append(
            [
                MODES[mode][0],
                p["matches"],
                f"{p['copies_found']}/{parity['expected_copies']}",
                p["copies_missed"],
                p["extra_matches"],
                f"+{p['only_here_vs_reference']} -{p['missing_here_vs_reference']}",
                missed,
            ]
        )
    print_table(
        f"Matches per mode (copies found against the {parity['expected_copies']:,} the site holds; "
        f"differences against {MODES[parity['reference']][0] if 'reference' in parity else '-'})",
        ["mode", "matches", "copies found", "missed", "extra", "vs first mode", "missed by kind"],
        prows,
    )
    if len(parity["modes"]) == 1:
        print("parity: one mode ran, nothing to compare it with")
    elif "agree" in parity:
        if parity["agree"]:
            print(f"parity: all {len(parity['modes'])} modes found the same {prows[0][1]} matches")
        else:
            print("parity: MODES DISAGREE on (page_url, work_id, chapter_index):")
            for mode, p in parity["modes"].items():
                if p["examples_missing_vs_reference"] or p["examples_only_here"]:
                    print(
                        f"  {mode}: missing e.g. {p['examples_missing_vs_reference']}, "
                        f"extra e.g. {p['examples_only_here']}"
                    )


def print_stages(stages: dict[str, Any], sqlite_run: ModeResult | None, site: PipelineSite) -> None:
    sqlite_pps = sqlite_run.pages_per_second if sqlite_run else 0.0
    stage_sum = stages["extract"]["mean"] + stages["analyse"]["mean"] + stages["compare"]["mean"]
    srows = [
        ["decode + extract main text", stages["extract"]["mean"], stages["extract"]["median"]],
        ["analyse (normalise, fingerprints)", stages["analyse"]["mean"], stages["analyse"]["median"]],
        ["compare with the registry", stages["compare"]["mean"], stages["compare"]["median"]],
        [
            "  (compare, first pass: cold cache)",
            stages["compare_first_pass"]["mean"],
            stages["compare_first_pass"]["median"],
        ],
        ["sum of the three stages", round(stage_sum, 2), ""],
    ]
    if sqlite_pps:
        wall = 1000 / sqlite_pps
        srows.append(["SQLite in-process crawl, wall per page", round(wall, 2), ""])
        srows.append(
            [
                "  rest (store, index, boilerplate, record, Scrapy, start-up)",
                round(wall - stage_sum, 2),
                "",
            ]
        )
    print_table(
        f"CPU ms per page per stage (in-process, time.process_time, {stages['pages']} pages of the site, "
        f"registry of {len(site.chapters):,} chapters on SQLite; {stages['copies_flagged_in_process']}/"
        f"{stages['copies_in_sample']} copies flagged)",
        ["stage", "mean ms", "median ms"],
        srows,
    )


def print_large(large: dict[str, Any]) -> None:
    lrows = []
    for backend, label in (("sqlite", "SQLite"), ("postgresql", "PostgreSQL")):
        seconds = large.get(backend)
        target = TARGET_REGISTER_SECONDS.get(backend)
        lrows.append(
            [
                label,
                "not reachable" if seconds is None else f"{seconds:.1f}",
                f"<= {target:g}" if target else "",
                ratio(seconds, target, higher_is_better=False),
            ]
        )
    print_table(
        f"Registering one work of {large['characters']:,} characters, {large['chapters']} chapters "
        "(`fptrack works add`, fresh database, wall seconds)",
        ["database", "seconds", "target", "ratio"],
        lrows,
    )


def print_scaling(scaling: dict[str, Any]) -> None:
    crows = []
    for row in scaling["rows"]:
        growth = compare_growth(scaling["rows"], row, "median_cpu_ms")
        last = row is scaling["rows"][-1] and len(scaling["rows"]) > 1
        crows.append(
            [
                f"{row['chapters']:,}",
                row["register_seconds_cumulative"],
                row["median_cpu_ms"],
                row["median_ms"],
                row["p90_ms"],
                row["median_ms_first_pass"],
                f"{row['copies_flagged']}/{row['copies']}",
                f"{compare_growth(scaling['rows'], row, 'median_ms'):.2f}x",
                f"{growth:.2f}x",
                f"<= {TARGET_COMPARE_GROWTH:g}x" if last else "",
                ratio(growth, TARGET_COMPARE_GROWTH, higher_is_better=False) if last else "",
            ]
        )
    print_table(
        f"Compare time per page as the registry grows (in-process, SQLite, {scaling['sample']} pages: "
        "half copies, half unrelated; medians of the second pass; the target reads CPU time, which other "
        "processes on the machine disturb less than wall time)",
        [
            "chapters",
            "register s",
            "cpu ms",
            "wall ms",
            "wall p90",
            "wall 1st pass",
            "copies flagged",
            "wall vs first",
            "cpu vs first",
            "target",
            "ratio",
        ],
        crows,
    )
    if scaling["stopped"]:
        print(f"note: {scaling['stopped']}")


def _by_round(values: list[float | None]) -> dict[str, Any]:
    return {
        "by_round": [round(v, 3) if v is not None else None for v in values],
        "median": round(m, 3) if (m := median_of(values)) is not None else None,
    }


def figures_of(
    measured: Measured,
    site: PipelineSite,
    parity: dict[str, Any],
    args: argparse.Namespace,
    info: dict[str, Any],
) -> dict[str, Any]:
    """The JSON line's figures."""
    bare = measured.bare
    bare_pps = float(bare["pages_per_second"]) if bare else 0.0
    rounds, scaling, large = measured.rounds, measured.scaling, measured.large
    modes = {
        r.mode: (
            {"skipped": r.skipped}
            if r.skipped
            else {
                "register_seconds": round(r.register_seconds, 2),
                "crawl_seconds": round(r.crawl_seconds, 2),
                "pages": r.pages_crawled,
                "failed": r.failed,
                "pages_per_second": round(r.pages_per_second, 3),
                "matches": len(r.matches),
                "worker_tasks": r.worker_tasks,
                "phases": r.phases,
                "ratio_to_bare_scrapy": round(r.pages_per_second / bare_pps, 3) if bare_pps else None,
                "cpu_seconds": {name: round(seconds, 2) for name, seconds in r.cpu.items()},
                "cpu_ms_per_page": round(r.cpu_ms_per_page, 2) if r.cpu_ms_per_page else None,
            }
        )
        for r in measured.results
    }
    ratio_to_bare = {mode: _by_round(values) for mode, values in ratios_by_round(rounds).items()}
    growth_rows = scaling["rows"] if scaling and len(scaling["rows"]) > 1 else None
    return {
        "benchmark": "pipeline_throughput",
        "quick": args.quick,
        "machine": info,
        "analyze_after_register": args.analyze,
        "site": {**site.counts(), **site.notes},
        "modes": modes,
        "bare_scrapy": bare,
        "rounds": {
            "count": len(rounds),
            "ratio_to_bare_scrapy": ratio_to_bare,
            "bare_scrapy_seconds": [b["seconds"] if b else None for b, _ in rounds],
            "cpu_over_bare_scrapy": {
                mode: _by_round(values) for mode, values in cpu_ratios_by_round(rounds).items()
            },
            "bare_scrapy_cpu_ms_per_page": [b.get("cpu_ms_per_page") if b else None for b, _ in rounds],
        },
        "parity": {
            "agree": parity.get("agree"),
            "expected_copies": parity["expected_copies"],
            "modes": {
                m: {k: v for k, v in p.items() if not k.startswith("examples")}
                for m, p in parity["modes"].items()
            },
        },
        "stages_cpu_ms": measured.stages,
        "register_large_work": large,
        "compare_scaling": scaling,
        "targets": {
            "postgres_w2_pages_per_second": {
                "target": 100,
                "measured": modes.get("postgres-w2", {}).get("pages_per_second"),
            },
            "sqlite_pages_per_second": {
                "target": 50,
                "measured": modes.get("sqlite", {}).get("pages_per_second"),
            },
            # the median over the rounds (one round: its ratio)
            "sqlite_ratio_to_bare_scrapy": {
                "target": TARGET_BARE_RATIO["sqlite"],
                "measured": ratio_to_bare.get("sqlite", {}).get("median"),
            },
            "postgres_w2_ratio_to_bare_scrapy": {
                "target": TARGET_BARE_RATIO["postgres-w2"],
                "measured": ratio_to_bare.get("postgres-w2", {}).get("median"),
            },
            "register_1m_postgres_seconds": {"target": 5, "measured": (large or {}).get("postgresql")},
            "compare_growth": {
                "target": TARGET_COMPARE_GROWTH,
                "measured_cpu": round(compare_growth(growth_rows, growth_rows[-1], "median_cpu_ms"), 3)
                if growth_rows
                else None,
                "measured_wall": round(compare_growth(growth_rows, growth_rows[-1], "median_ms"), 3)
                if growth_rows
                else None,
                "largest_registry": scaling["rows"][-1]["chapters"] if scaling and scaling["rows"] else None,
            },
        },
    }


def main() -> None:
    parser = command_line()
    args = parser.parse_args()
    if args.bare_spider:
        bare_spider_main(args.bare_spider, args.bare_depth, args.bare_max_pages, args.concurrency)
        return
    require_corpus("pipeline_throughput")
    plan = plan_of(args, parser)
    started = time.monotonic()
    info = machine()
    services = Services(args.postgres, args.redis)
    services.probe()
    info["postgresql"] = services.postgres_version or None
    info["postgresql_autovacuum"] = services.postgres_autovacuum or None
    progress(f"building the site from {CORPUS}: {plan.pages} pages, {plan.registry} registered chapters")
    pools = corpus_pools(CORPUS)
    site = build_site(pools, pages=plan.pages, registry=plan.registry, seed=args.seed)
    workdir = Path(tempfile.mkdtemp(prefix="fptrack-pipeline-"))
    try:
        measured = measure(plan, args, services, pools, site, workdir)
    finally:
        if args.keep:
            progress(f"kept {workdir} and databases {', '.join(services.created) or '(none)'}")
        else:
            try:
                services.drop_created()
            finally:
                shutil.rmtree(workdir, ignore_errors=True)

    print_context(info, services, args, site, measured)
    print_end_to_end(measured)
    print_rounds(measured.rounds)
    parity = parity_report(site, measured.results)
    print_parity(parity)
    if measured.stages:
        print_stages(measured.stages, measured.sqlite_run, site)
    if measured.large:
        print_large(measured.large)
    if measured.scaling:
        print_scaling(measured.scaling)
    figures = figures_of(measured, site, parity, args, info)
    figures["seconds"] = round(time.monotonic() - started, 1)
    print(json.dumps(figures, ensure_ascii=False, default=str), flush=True)


if __name__ == "__main__":
    main()
