"""Distributed crawls: real crawler processes (`fptrack crawl --distributed`, `fptrack sites run`) sharing one
frontier in a real Redis (scrapy-redis), storing into one crawl job in PostgreSQL, against a loopback site
that counts every request it gets."""

from __future__ import annotations

import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from fptrack.core.settings import Settings
from fptrack.storage.db import create_engine_for
from fptrack.storage.models import CrawlJob, Page
from testbed.sites import Page as SitePage
from testbed.sites import SiteURL, closed_port_url, serve_site
from tests.conftest import REDIS_URL
from tests.integration.crawler.harness import OTHER_PARAGRAPHS, PARAGRAPHS, REPO_ROOT
from tests.support.env import clean_environ

pytestmark = [pytest.mark.slow, pytest.mark.redis, pytest.mark.postgres]

SECTIONS = 20
CHAPTERS_PER_SECTION = 15  # 1 index + 20 sections + 300 chapters = 321 pages
KEY_PATTERN = "fptrack:crawl:*"


def _site_pages(delay: float) -> dict[str, SitePage]:
    """An index, sections, chapters; every chapter links back to the index, its section and its neighbours, so
    the same URLs are found many times over (by both processes)."""
    pages: dict[str, SitePage] = {}
    sections = "".join(f'<a href="/s/{s}/">卷{s}</a> ' for s in range(SECTIONS))
    pages["/"] = SitePage.html(f"<html><body><h1>目录</h1>{sections}</body></html>", delay=delay)
    for s in range(SECTIONS):
        chapters = "".join(f'<a href="/c/{s}-{c}.html">第{c}章</a> ' for c in range(CHAPTERS_PER_SECTION))
        pages[f"/s/{s}/"] = SitePage.html(
            f"<html><body><h1>卷{s}</h1>{chapters}<a href='/'>目录</a></body></html>", delay=delay
        )
        for c in range(CHAPTERS_PER_SECTION):
            text = "".join(f"<p>{p}（{s}-{c}）</p>" for p in (PARAGRAPHS + OTHER_PARAGRAPHS))
            links = (
                f'<a href="/">目录</a> <a href="/s/{s}/">卷</a> '
                f'<a href="/c/{s}-{(c + 1) % CHAPTERS_PER_SECTION}.html">下一章</a>'
            )
            pages[f"/c/{s}-{c}.html"] = SitePage.html(
                f"<html><head><title>第{c}章</title></head><body><h1>第{c}章</h1>{text}{links}</body></html>",
                delay=delay,
            )
    return pages


@pytest.fixture
def crawl_redis() -> Iterator[redis.Redis]:
    """The test Redis database (FPTRACK_TEST_REDIS_URL); fptrack's crawl keys are checked, and removed, by
    pattern."""
    client = redis.Redis.from_url(REDIS_URL)
    for key in client.scan_iter(KEY_PATTERN):
        client.delete(key)
    yield client
    for key in client.scan_iter(KEY_PATTERN):
        client.delete(key)
    client.close()


def _env(settings: Settings, **extra: str) -> dict[str, str]:
    env = clean_environ()
    env.update(
        FPTRACK_DATA_DIR=str(settings.data_dir),
        FPTRACK_DATABASE_URL=settings.database_url,
        FPTRACK_CRAWL_TIMEOUT="10",
        FPTRACK_CRAWL_AUTOTHROTTLE="false",
        FPTRACK_CRAWL_CONCURRENCY_PER_SITE="4",
        FPTRACK_CRAWL_OBEY_ROBOTS="true",
        **extra,
    )
    return env


def _crawl_command(base: SiteURL, *args: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "fptrack.cli",
        "crawl",
        "--distributed",
        base + "/",
        "--allow-private-host",
        base.key,
        "-q",
        *args,
    ]


def _start(command: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        command, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _finish(process: subprocess.Popen[str], timeout: float = 240) -> tuple[int, str, str]:
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        out, err = process.communicate()
        pytest.fail(f"crawl process did not finish:\n{out}\n{err}")
    return process.returncode, out, err


def _jobs(settings: Settings) -> list[CrawlJob]:
    engine = create_engine_for(settings)
    try:
        with Session(engine, expire_on_commit=False) as session:
            return list(session.scalars(select(CrawlJob).order_by(CrawlJob.id)))
    finally:
        engine.dispose()


def _pages(settings: Settings) -> tuple[int, int, dict[int | None, int]]:
    engine = create_engine_for(settings)
    try:
        with Session(engine) as session:
            rows = session.scalar(select(func.count(Page.id))) or 0
            urls = session.scalar(select(func.count(func.distinct(Page.url)))) or 0
            by_job = dict(
                session.execute(
                    select(Page.crawl_job_id, func.count(Page.id)).group_by(Page.crawl_job_id)
                ).all()
            )
            return int(rows), int(urls), {k: int(v) for k, v in by_job.items()}
    finally:
        engine.dispose()


def test_two_processes_share_one_frontier_and_one_job(
    postgres_settings: Settings, crawl_redis: redis.Redis, tmp_path: Path
) -> None:
    env = _env(postgres_settings, FPTRACK_CRAWL_REDIS_URL=REDIS_URL)
    pages = _site_pages(delay=0.05)
    with serve_site(pages) as base:
        first = _start(_crawl_command(base, "--depth", "3", "--max-pages", "1000"), env)
        second = _start(_crawl_command(base, "--depth", "3", "--max-pages", "1000"), env)
        results = [_finish(first), _finish(second)]
        for code, out, err in results:
            assert code == 0, f"{out}\n{err}"

        # every URL fetched exactly once, by one of the two processes (robots.txt: once per process)
        fetched = Counter(base.page_requests)
        assert set(fetched) == set(pages)
        assert {path: n for path, n in fetched.items() if n != 1} == {}
        assert base.requests.count("/robots.txt") == 2

        # one job, every page stored once into it, its counts those of both processes
        jobs = _jobs(postgres_settings)
        assert len(jobs) == 1
        job = jobs[0]
        assert job.status == "finished", job.error
        assert (job.pages_seen, job.pages_stored, job.pages_failed) == (len(pages), len(pages), 0)
        assert job.stats["by_status"] == {"200": len(pages)}
        assert job.stats["counters"]["fptrack/distributed_processes"] == 2
        rows, urls, by_job = _pages(postgres_settings)
        assert rows == urls == len(pages)
        assert by_job == {job.id: len(pages)}

        # both processes did part of the work; one of them reported the whole job
        outputs = [out for _, out, _ in results]
        assert sum("this process's part of distributed crawl" in out for out in outputs) == 1
        assert sum(f"crawled {len(pages)} page(s)" in out for out in outputs) == 1
        part = next(out for out in outputs if "this process's part" in out)
        part_pages = int(part.split(f"#{job.id}: ", 1)[1].split(" ", 1)[0])
        assert 0 < part_pages < len(pages)

        # the run's keys are gone, and only ours were ever there
        assert list(crawl_redis.scan_iter(KEY_PATTERN)) == []

        # a second crawl of the site starts fresh: a new job that fetches every page again, once
        code, out, err = _finish(_start(_crawl_command(base, "--depth", "3", "--max-pages", "1000"), env))
        assert code == 0, f"{out}\n{err}"
        again = Counter(base.page_requests)
        assert {path: n for path, n in again.items() if n != 2} == {}
        second_job = _jobs(postgres_settings)[-1]
        assert second_job.id != job.id and second_job.status == "finished"
        # the chapters are unchanged since the first crawl (index and sections, link lists without text, are
        # stored)
        chapters = SECTIONS * CHAPTERS_PER_SECTION
        assert (second_job.pages_seen, second_job.pages_unchanged) == (len(pages), chapters)
        assert list(crawl_redis.scan_iter(KEY_PATTERN)) == []


def test_max_pages_counts_the_pages_of_all_processes(
    postgres_settings: Settings, crawl_redis: redis.Redis
) -> None:
    env = _env(postgres_settings, FPTRACK_CRAWL_REDIS_URL=REDIS_URL)
    with serve_site(_site_pages(delay=0.05)) as base:
        processes = [_start(_crawl_command(base, "--depth", "3", "--max-pages", "40"), env) for _ in range(2)]
        for code, out, err in [_finish(p) for p in processes]:
            assert code == 0, f"{out}\n{err}"
    (job,) = _jobs(postgres_settings)
    assert job.status == "finished", job.error
    assert (job.pages_seen, job.pages_stored) == (40, 40)
    rows, _, _ = _pages(postgres_settings)
    assert rows == 40
    assert list(crawl_redis.scan_iter(KEY_PATTERN)) == []


def test_distributed_without_redis_is_a_one_line_error(postgres_settings: Settings) -> None:
    with serve_site({"/": SitePage.html("<p>x</p>")}) as base:
        for extra, expected in (
            ({}, "error: a distributed crawl needs Redis: set FPTRACK_CRAWL_REDIS_URL"),
            ({"FPTRACK_BROKER_URL": "amqp://127.0.0.1//"}, "error: a distributed crawl needs Redis"),
            (
                {"FPTRACK_CRAWL_REDIS_URL": closed_port_url().replace("http", "redis")},
                "error: cannot reach the crawl Redis at redis://127.0.0.1:",
            ),
        ):
            completed = subprocess.run(
                _crawl_command(base),
                cwd=REPO_ROOT,
                env=_env(postgres_settings, **extra),
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
            assert completed.returncode == 1
            assert completed.stderr.startswith(expected), completed.stderr
            assert len(completed.stderr.strip().splitlines()) == 1, completed.stderr
        assert base.requests == []  # nothing fetched
    assert _jobs(postgres_settings) == []  # and no crawl job left behind


def test_a_distributed_site_run_twice_is_one_crawl(
    postgres_settings: Settings, crawl_redis: redis.Redis
) -> None:
    env = _env(postgres_settings, FPTRACK_CRAWL_REDIS_URL=REDIS_URL)

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "fptrack.cli", *args],
            cwd=REPO_ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    # slow enough that the joiner, started once the crawl runs, finds it running
    pages = _site_pages(delay=0.2)
    with serve_site(pages) as base:
        added = cli(
            "sites",
            "add",
            "shared-books",
            base + "/",
            "--depth",
            "3",
            "--max-pages",
            "1000",
            "--allow-private",
            "--distributed",
        )
        assert added.returncode == 0, added.stderr
        shown = cli("sites", "show", "shared-books")
        assert "distributed    True" in shown.stdout, shown.stdout
        nothing = cli("sites", "run", "shared-books", "--join")
        assert nothing.returncode == 1
        assert (
            nothing.stderr.strip()
            == "error: site shared-books: no distributed crawl of " + base.key + " is running to join"
        )

        command = [sys.executable, "-m", "fptrack.cli", "sites", "run", "shared-books", "-q"]
        first = _start(command, env)
        deadline = time.monotonic() + 60
        while not base.page_requests and time.monotonic() < deadline:
            time.sleep(0.05)
        joiner = _start([*command, "--join"], env)
        results = [_finish(first), _finish(joiner)]
        for code, out, err in results:
            assert code == 0, f"{out}\n{err}"
        fetched = Counter(base.page_requests)
        assert set(fetched) == set(pages) and set(fetched.values()) == {1}
    (job,) = _jobs(postgres_settings)
    assert (job.status, job.trigger, job.pages_seen) == ("finished", "site", len(pages))
    assert job.stats["counters"]["fptrack/distributed_processes"] == 2
    assert list(crawl_redis.scan_iter(KEY_PATTERN)) == []

    edited = cli("sites", "edit", "shared-books", "--no-distributed")
    assert edited.returncode == 0, edited.stderr
    refused = cli("sites", "run", "shared-books", "--join")
    assert refused.returncode == 1 and "is not distributed" in refused.stderr
