"""Scheduled crawls running unattended: a real Celery worker with beat over Redis (a queue of this test's
own), PostgreSQL, and a loopback pirate site. Nobody types a crawl command: beat starts each due crawl in a
process of its own, one crawl of the site at a time, each recorded as a crawl job."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from itertools import pairwise
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from fptrack.cli.demo import DEMO_DATA, demo_chapters
from fptrack.core.settings import Settings
from fptrack.storage.db import create_engine_for
from fptrack.storage.models import CrawlJob, Match, MonitorLock, Site
from testbed.sites import Page, chapter_page, serve_site
from tests.conftest import REDIS_URL
from tests.support.env import clean_environ

pytestmark = [pytest.mark.slow, pytest.mark.redis, pytest.mark.postgres]

CHAPTERS = demo_chapters("lighthouse.txt")


def _env(settings: Settings, **extra: str) -> dict[str, str]:
    env = clean_environ()
    env.update(
        FPTRACK_DATA_DIR=str(settings.data_dir),
        FPTRACK_DATABASE_URL=settings.database_url,
        FPTRACK_CRAWL_TIMEOUT="5",
        **extra,
    )
    return env


def _run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fptrack.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _jobs(settings: Settings) -> list[CrawlJob]:
    engine = create_engine_for(settings)
    try:
        with Session(engine, expire_on_commit=False) as session:
            return list(session.scalars(select(CrawlJob).order_by(CrawlJob.id)))
    finally:
        engine.dispose()


def _scalar(settings: Settings, query: object) -> object:
    engine = create_engine_for(settings)
    try:
        with Session(engine) as session:
            return session.execute(query).scalar()  # type: ignore[call-overload]
    finally:
        engine.dispose()


def test_two_scheduled_crawls_of_a_site_run_unattended(postgres_settings: Settings, tmp_path: Path) -> None:
    env = _env(
        postgres_settings,
        FPTRACK_BROKER_URL=REDIS_URL,
        FPTRACK_TASK_QUEUE=f"sched-{uuid.uuid4().hex[:8]}",
        FPTRACK_SCHEDULE_EVERY="1",
        FPTRACK_CRAWL_STALE_SECONDS="10",
    )
    in_process = {**env, "FPTRACK_BROKER_URL": ""}
    assert _run(in_process, "works", "add", str(DEMO_DATA / "lighthouse.txt")).returncode == 0
    pages = {f"/c/{n}.html": chapter_page(f"第{n}页", CHAPTERS[n].split("\n")) for n in range(3)}
    pages["/"] = Page.html("".join(f'<a href="{path}">{path}</a> ' for path in pages))
    with serve_site(pages) as base:
        added = _run(
            in_process,
            "sites",
            "add",
            "lighthouse-copies",
            base + "/",
            "--depth",
            "1",
            "--schedule",
            "3",
            "--allow-private",
        )
        assert added.returncode == 0, added.stderr
        log = open(tmp_path / "worker.log", "wb")  # noqa: SIM115 - the worker owns it
        worker = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "fptrack.cli",
                "worker",
                "--beat",
                "--concurrency",
                "2",
                "--loglevel",
                "INFO",
            ],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            deadline = time.monotonic() + 180
            while time.monotonic() < deadline:
                done = [j for j in _jobs(postgres_settings) if j.status != "running"]
                if len(done) >= 2:
                    break
                time.sleep(1)
            # stop scheduling, let a crawl under way finish (quiet for 5 s: a crawl process started just
            # before the site was disabled either skips or claims it within that time), then stop the worker
            assert _run(in_process, "sites", "edit", "lighthouse-copies", "--disable").returncode == 0
            quiet_since = time.monotonic()
            while time.monotonic() < deadline and time.monotonic() - quiet_since < 5:
                busy = _scalar(postgres_settings, select(MonitorLock.name)) is not None or any(
                    j.status == "running" for j in _jobs(postgres_settings)
                )
                if busy:
                    quiet_since = time.monotonic()
                time.sleep(0.5)
        finally:
            os.killpg(worker.pid, signal.SIGTERM)
            worker.wait(timeout=60)
            log.close()
        requests = list(base.page_requests)
    jobs = _jobs(postgres_settings)
    worker_log = (tmp_path / "worker.log").read_text(errors="replace")
    assert len(jobs) >= 2, worker_log
    site_id = _scalar(postgres_settings, select(Site.id).where(Site.name == "lighthouse-copies"))
    for job in jobs:
        assert (job.trigger, job.site_id, job.status) == ("schedule", site_id, "finished"), (
            job.error,
            worker_log,
        )
        assert job.stats is not None
    # one crawl of the site at a time: each started after the one before had finished
    for before, after in pairwise(jobs):
        assert before.finished_at is not None and before.finished_at <= after.started_at
    first, second = jobs[0], jobs[1]
    assert first.stats is not None and first.stats["by_status"] == {"200": 4}
    assert first.copies_found == 3 and first.pages_stored == 4, (first.stats, worker_log[-4000:])
    # a re-crawl is incremental (crawler/known.py): the entry page again, not the chapters it stored, whose
    # copies are not due for a re-check yet
    assert second.stats is not None and second.stats["by_status"] == {"200": 1}, second.stats
    assert second.stats["counters"].get("fptrack/known_pages_skipped") == 3
    assert _scalar(postgres_settings, select(Match.id).where(Match.status != "flagged")) is None
    assert requests.count("/c/0.html") == 1
