"""Monitoring that runs itself, as a new user would set it up from the README: register a work, add two pirate
sites with schedules, start one worker with beat, and type nothing more. The crawls run when due, the copies
on both sites are found, and when one site removes its copy the next takedown re-check records it taken down.

Real parts only: PostgreSQL, Redis with a real Celery worker and beat, crawl processes started by the
scheduler, two loopback sites that change while the test runs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from fptrack.cli.demo import DEMO_DATA, demo_chapters
from fptrack.core.settings import Settings
from fptrack.storage.db import create_engine_for
from fptrack.storage.models import CrawlJob, Match, Page, Site
from testbed.sites import render_chapter
from tests.conftest import REDIS_URL
from tests.support.env import clean_environ
from tests.support.live_site import LiveSite, serve_live_site

pytestmark = [pytest.mark.slow, pytest.mark.redis, pytest.mark.postgres]

CHAPTERS = demo_chapters("lighthouse.txt")


def _fill(site: LiveSite, numbers: range, template: str) -> None:
    links = "".join(f'<li><a href="/c/{n}.html">第{n + 1}章</a></li>' for n in numbers)
    site.set("/", f"<html><head><title>目录</title></head><body><ul>{links}</ul></body></html>")
    for n in numbers:
        markup = render_chapter(f"第{n + 1}章", CHAPTERS[n].split("\n"), template=template).decode("utf-8")
        site.set(f"/c/{n}.html", markup)


def _query(settings: Settings, build: Callable[[Session], object]) -> object:
    engine = create_engine_for(settings)
    try:
        with Session(engine, expire_on_commit=False) as session:
            return build(session)
    finally:
        engine.dispose()


def test_two_monitored_sites_crawl_find_copies_and_record_a_takedown_unattended(
    postgres_settings: Settings, tmp_path: Path
) -> None:
    settings = postgres_settings
    with serve_live_site() as first, serve_live_site() as second:
        _fill(first, range(2), "biquge")
        _fill(second, range(1, 3), "html5-article")
        env = clean_environ()
        env.update(
            FPTRACK_DATA_DIR=str(tmp_path / "data"),
            FPTRACK_DATABASE_URL=settings.database_url,
            FPTRACK_BROKER_URL=REDIS_URL,
            FPTRACK_TASK_QUEUE=f"unattended-{uuid.uuid4().hex[:8]}",
            FPTRACK_SCHEDULE_EVERY="1",
            FPTRACK_RECHECK_EVERY="2",
            FPTRACK_RECHECK_YOUNG_EVERY="2",
            FPTRACK_RECHECK_CONFIRM_AFTER="2",
            FPTRACK_CRAWL_TIMEOUT="5",
            FPTRACK_CRAWL_STALE_SECONDS="15",
        )
        in_process = {**env, "FPTRACK_BROKER_URL": ""}

        def fptrack(*args: str, environment: dict[str, str] = in_process) -> subprocess.CompletedProcess[str]:
            done = subprocess.run(
                [sys.executable, "-m", "fptrack.cli", *args],
                env=environment,
                capture_output=True,
                text=True,
                timeout=180,
                check=False,
            )
            assert done.returncode == 0, (args, done.stdout, done.stderr)
            return done

        # what the user types (README, "Using it" and docs/monitoring.md), then nothing more
        fptrack("init")
        fptrack("works", "add", str(DEMO_DATA / "lighthouse.txt"), "--title", "灯塔")
        for name, site in (("pirate-one", first), ("pirate-two", second)):
            # a schedule of an hour: each site is crawled at once (a new schedule is due), then not again here
            fptrack(
                "sites", "add", name, site.base + "/", "--schedule", "1h", "--depth", "1", "--allow-private"
            )
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

        def matches_on(host: str) -> list[Match]:
            return _query(
                settings,
                lambda s: list(  # type: ignore[return-value]
                    s.scalars(select(Match).join(Page, Page.id == Match.page_id).where(Page.host == host))
                ),
            )

        def wait_for(condition: Callable[[], bool], seconds: float = 240) -> bool:
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline:
                if condition():
                    return True
                time.sleep(1)
            return False

        try:
            found = wait_for(lambda: len(matches_on(first.key)) == 2 and len(matches_on(second.key)) == 2)
            assert found, (tmp_path / "worker.log").read_text(errors="replace")[-4000:]
            # the first site takes its copy of chapter 1 down; the re-checks notice without being asked (a
            # copy is due every 2 s here, and a second fetch 2 s after the first confirms the removal)
            first.remove("/c/0.html")
            taken_down = wait_for(lambda: any(m.taken_down_at is not None for m in matches_on(first.key)))
        finally:
            os.killpg(worker.pid, signal.SIGTERM)
            worker.wait(timeout=60)
            log.close()
        worker_log = (tmp_path / "worker.log").read_text(errors="replace")
        assert taken_down, worker_log[-4000:]

        jobs: list[CrawlJob] = _query(settings, lambda s: list(s.scalars(select(CrawlJob))))  # type: ignore[assignment]
        sites = dict(_query(settings, lambda s: s.execute(select(Site.id, Site.name)).all()))  # type: ignore[arg-type]
        crawled = {
            sites[job.site_id] for job in jobs if job.status == "finished" and job.trigger == "schedule"
        }
        assert crawled == {"pirate-one", "pirate-two"}, [
            (j.site_id, j.trigger, j.status, j.error) for j in jobs
        ]
        assert "fptrack.start_due_crawls" in worker_log and "fptrack.recheck_takedowns" in worker_log

        down = [m for m in matches_on(first.key) if m.taken_down_at is not None]
        assert [m.recheck_state for m in down] == ["gone"]
        assert all(m.recheck_state != "gone" for m in matches_on(second.key))

        # what the user then reads: the takedown in the CLI, with its time to takedown
        listed = [json.loads(line) for line in fptrack("takedowns", "--format", "json").stdout.splitlines()]
        by_id = {row["id"]: row for row in listed}
        assert by_id[down[0].id]["state"] == "gone" and by_id[down[0].id]["time_to_takedown_seconds"] >= 0
